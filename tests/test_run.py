"""``fwd9m run``: start-up environment, fresh interpreter, import hook, pass-through."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from conftest import cli_in_process

# A script that knows nothing about fwd9m. Its output depends on set iteration order of
# strings (PYTHONHASHSEED), on Python/NumPy/torch global RNGs and on a CPU kernel that
# is nondeterministic without torch's switch.
UNMODIFIED = textwrap.dedent("""
    import random, sys
    words = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
             "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"}
    print("set", ",".join(words))
    print("random", random.random())
    if "--torch" in sys.argv:
        random.seed(99)
        random.random()
        import numpy as np
        import torch
        expected = random.Random(99)
        expected.random()
        print("own seed kept after late import", random.random() == expected.random())
        torch.set_num_threads(2)
        print("numpy", np.random.rand())
        print("torch", torch.nn.Linear(3, 2).weight.detach().numpy().tobytes().hex())
        idx = torch.randint(0, 10, (1_000_000,))
        vals = torch.randn(1_000_000)
        sums = {torch.zeros(10).index_put_((idx,), vals, accumulate=True).numpy().tobytes()
                for _ in range(5)}
        print("index_put distinct", len(sums), torch.are_deterministic_algorithms_enabled())
""")


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(UNMODIFIED)
    return path


def _clean_env(**extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONHASHSEED", "FWD9M_SEED", "FWD9M_RUN_ENABLE", "PYTHONPATH")
    }
    env.update(extra)
    return env


def _run(*args, **kw):
    import subprocess

    return subprocess.run(list(args), capture_output=True, text=True, timeout=300, **kw)


def run_fwd9m(*args, env, cwd=None):
    """``python -m fwd9m ARGS`` with exactly ``env`` (no inherited FWD9M_SEED etc.)."""
    return _run(sys.executable, "-m", "fwd9m", *args, env=env, cwd=cwd)


def test_unmodified_script_is_reproducible_under_run(script):
    pytest.importorskip("torch")
    env = _clean_env()
    plain = [_run(sys.executable, str(script), env=env).stdout for _ in range(2)]
    assert plain[0].splitlines()[0] != plain[1].splitlines()[0], "set order already fixed?"
    import subprocess

    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "fwd9m", "run", "--seed", "0", str(script), "--torch"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    runs = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    for _stdout, stderr, code in runs:
        assert code == 0, stderr[-3000:]
    assert runs[0][0] == runs[1][0]
    assert "index_put distinct 1 True" in runs[0][0]
    assert "own seed kept after late import True" in runs[0][0]


def test_show_lists_the_settings_of_the_frameworks_the_script_uses(tmp_path):
    """A JAX-only script: XLA_FLAGS is credited to JAX, and the torch setting (set all
    the same, harmlessly) is named on one line as not for this script."""
    script = tmp_path / "train.py"
    script.write_text("import jax\nimport optax\nkey = jax.random.key(0)\n")
    out = run_fwd9m("run", "--show", str(script), env=_clean_env())
    assert out.returncode == 0, out.stderr
    shown = [line for line in out.stdout.splitlines() if line.startswith("[")]
    assert any(line.startswith("[jax] env:XLA_FLAGS") for line in shown), out.stdout
    assert not any(line.startswith(("[torch]", "[tensorflow]", "[keras]")) for line in shown), out.stdout
    assert "also set, though this script (jax) does not use them" in out.stdout
    assert "HOROVOD_FUSION_THRESHOLD [horovod]" in out.stdout
    assert "CUBLAS_WORKSPACE_CONFIG [torch]" in out.stdout


def test_show_lists_startup_environment_as_json():
    out = run_fwd9m("run", "--seed", "7", "--threads", "2", "--show", "--format", "json", "train.py", env=_clean_env())
    assert out.returncode == 0, out.stderr
    changes = {c["what"]: c for c in json.loads(out.stdout)}
    assert changes["env:PYTHONHASHSEED"]["new"] == "7"
    assert changes["env:FWD9M_SEED"]["new"] == "7"
    assert changes["env:HOROVOD_FUSION_THRESHOLD"]["new"] == "0"
    assert changes["env:OMP_NUM_THREADS"]["new"] == "2"
    assert "--xla_gpu_deterministic_ops=true" in changes["env:XLA_FLAGS"]["new"]
    assert changes["env:CUBLAS_WORKSPACE_CONFIG"]["new"] == ":4096:8"
    assert all(c["source"] and c["why"] for c in changes.values())
    no_enable = run_fwd9m("run", "--no-enable", "--show", "train.py", env=_clean_env())
    assert "PYTHONHASHSEED" in no_enable.stdout and "FWD9M_RUN_ENABLE" not in no_enable.stdout
    alone = run_fwd9m("run", "--seed", "3", "--show", env=_clean_env())  # no program needed to list
    assert alone.returncode == 0 and "PYTHONHASHSEED: <unset> -> '3'" in alone.stdout, alone.stderr
    nothing = run_fwd9m("run", "--seed", "3", env=_clean_env())
    assert nothing.returncode == 2 and "nothing to run" in nothing.stderr


def test_plan_keeps_pythonpath_and_checks_ranges():
    from fwd9m._cli.run import plan
    from fwd9m._runtime.bootstrap import bootstrap_dir
    from fwd9m.errors import ConfigurationError

    env, _ = plan(3, environ={"PYTHONPATH": "/a:/b", "XLA_FLAGS": "--xla_foo=1"})
    assert env["PYTHONPATH"].split(os.pathsep) == [bootstrap_dir(), "/a", "/b"]
    assert env["XLA_FLAGS"] == "--xla_foo=1 --xla_gpu_deterministic_ops=true"
    again, changes = plan(3, environ=env)
    assert again["PYTHONPATH"] == env["PYTHONPATH"]
    assert "env:PYTHONPATH" not in {c.what for c in changes}
    for bad in (-1, 2**32):
        with pytest.raises(ConfigurationError):
            plan(bad, environ={})
    with pytest.raises(ConfigurationError):
        plan(0, threads=0, environ={})


def test_startup_env_of_simulated_tensorflow_versions():
    """TF 2.5 cannot be installed here: its start-up variables come from the recipe."""
    from fwd9m import tensorflow as fw_tf

    names = {c.what: c.new for c in fw_tf.startup_env(version="2.5.0", environ={})}
    assert names["env:TF_DETERMINISTIC_OPS"] == "1"
    assert names["env:TF_CUDNN_USE_FRONTEND"] == "1"
    assert "env:TF_DETERMINISTIC_OPS" not in {c.what for c in fw_tf.startup_env("2.21.0", {})}


def test_argv_exit_code_module_and_user_sitecustomize(tmp_path):
    """One fresh interpreter per form: argv and __name__, exit status, -m, and a user
    sitecustomize that fwd9m's start-up hook shadows but still runs."""
    (tmp_path / "prog.py").write_text(
        textwrap.dedent("""
        import os, sys
        here = os.path.dirname(os.path.abspath(__file__))
        print(__name__, sys.argv, os.environ["PYTHONHASHSEED"], sys.path[0] == here)
        import sitecustomize
        print("user sitecustomize ran:", getattr(sitecustomize, "USER", False))
        raise SystemExit(int(sys.argv[1]))
    """)
    )
    user = tmp_path / "user_site"
    user.mkdir()
    (user / "sitecustomize.py").write_text("USER = True\n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "tool.py").write_text("import sys\nprint('module', __name__, sys.argv)\n")
    env = _clean_env(PYTHONPATH=str(user))
    out = run_fwd9m("run", "--seed", "5", str(tmp_path / "prog.py"), "7", "--flag", env=env)
    assert out.returncode == 7, out.stderr
    assert f"__main__ ['{tmp_path / 'prog.py'}', '7', '--flag'] 5 True" in out.stdout
    assert "user sitecustomize ran: True" in out.stdout
    out = run_fwd9m("run", "-m", "pkg.tool", "x", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert "module __main__" in out.stdout and "'x'" in out.stdout


def test_signal_passes_through(tmp_path):
    (tmp_path / "die.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    out = run_fwd9m("run", str(tmp_path / "die.py"), env=_clean_env())
    assert out.returncode == -signal.SIGTERM


def test_usage_errors_exit_2_without_traceback(tmp_path):
    for args in (
        ("run", str(tmp_path / "missing.py")),
        ("run",),
        ("run", "--", "no-such-cmd-x"),
        ("run", "--seed", "-3", "x.py"),
    ):
        out = run_fwd9m(*args, env=_clean_env())
        assert out.returncode == 2, (args, out.stderr)
        assert "Traceback" not in out.stderr


def test_launcher_ranks_inherit_determinism(tmp_path):
    """`fwd9m run -- LAUNCHER`: torch's own launcher starts 2 ranks as new interpreters;
    each gets the environment and the import hook."""
    pytest.importorskip("torch")
    (tmp_path / "rank.py").write_text(
        textwrap.dedent("""
        import os, pathlib, torch
        # One file per rank: two ranks printing to one pipe can interleave ("rankrank").
        fields = ("rank", os.environ.get("RANK"), os.environ.get("PYTHONHASHSEED"),
                  torch.are_deterministic_algorithms_enabled(), torch.initial_seed())
        out = pathlib.Path(__file__).with_name("rank" + os.environ["RANK"] + ".txt")
        out.write_text(" ".join(map(str, fields)))
    """)
    )
    out = run_fwd9m(
        "run",
        "--seed",
        "11",
        "--",
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        str(tmp_path / "rank.py"),
        env=_clean_env(OMP_NUM_THREADS="1"),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)]
    assert lines == ["rank 0 11 True 11", "rank 1 11 True 11"], out.stdout


_cli = cli_in_process


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return str(path)


def test_empty_blank_and_non_file_targets_are_clear_usage_errors(capsys, tmp_path, fifo):
    """An empty name (``fwd9m run "$SCRIPT"`` with the variable unset) said "' is a
    directory without __main__.py' (Path('') is the current folder); a named pipe or
    /dev/zero as the script blocked or never ended."""
    (tmp_path / "s.py").write_text("print(1)\n")
    cases = [
        (("run", ""), "the script name is empty (''"),
        (("run", " "), "the script name is empty (' '"),
        (("run", "-m", ""), "the module name after -m is empty"),
        (("run", "-m", " "), "the module name after -m is empty"),
        (("run", "-m", str(tmp_path / "s.py")), "drop -m to run the script"),
        (("run", "-m", "a b"), "'a b' is not a module name"),
        (("run", "--", ""), "command not found: ''"),
        (("run", f" {tmp_path / 's.py'}"), "did you mean"),
        (("run", fifo), "is a named pipe, not a regular script file"),
        (("run", "/dev/zero"), "is a character device"),
        (("run", str(tmp_path)), "a directory without __main__.py"),
        (("debug", ""), "the script name is empty"),
        (("run", "--record-ranks", "", "x.py"), "name a folder for the rank traces"),
        (("run", "--record-ranks", str(tmp_path / "s.py"), "x.py"), "name a folder"),
    ]
    for args, message in cases:
        code, err = _cli(capsys, *args)
        assert code == 2 and message in err and "Traceback" not in err, (args, err)


def test_resolve_target_is_the_one_check_for_run_check_and_debug(tmp_path, fifo):
    from fwd9m._runtime.launch import check_module_name, resolve_target
    from fwd9m.errors import RunError

    for bad, message in (
        ("", "is empty"),
        ("  ", "is empty"),
        (fifo, "named pipe"),
        ("/dev/null", "character device"),
        (str(tmp_path / "no.py"), "not found"),
    ):
        with pytest.raises(RunError, match=message):
            resolve_target(bad)
    with pytest.raises(RunError, match="after -m is empty"):
        resolve_target("", module=True)
    with pytest.raises(RunError, match="write it as -m pkg.mod"):
        check_module_name("pkg/mod.py")
    check_module_name("torch.distributed.run")  # only the form: nothing imported
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__main__.py").write_text("")
    assert resolve_target(str(tmp_path / "pkg")) == str(tmp_path / "pkg")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads files without permission")
def test_unreadable_script_is_a_clear_error(capsys, tmp_path):
    path = tmp_path / "locked.py"
    path.write_text("print(1)\n")
    path.chmod(0)
    code, err = _cli(capsys, "run", str(path))
    assert code == 2 and "permission denied" in err and "chmod u+r" in err, err


def test_module_target_is_looked_up_in_the_current_directory(tmp_path):
    """`python -m pkg.train` finds a local package through the current directory; the
    console script `fwd9m` does not have it on sys.path, so resolve_target adds it."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text("print('hi')\n")
    code = (
        "import os, sys; sys.path[:] = [p for p in sys.path if p not in ('', os.getcwd())]\n"
        "from fwd9m._runtime.launch import resolve_target\n"
        "print(resolve_target('pkg.train', module=True), os.getcwd() in sys.path)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.split() == ["pkg.train", "False"], out.stderr
