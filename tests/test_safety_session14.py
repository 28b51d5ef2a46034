"""Safety session 14: fwd9m run for real on small user folders (no framework, plain
Python scripts), each test a scenario that lost, changed or hid a user's file, hung, or
printed raw control characters before its fix."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _fwd9m(args: list[str], cwd: Path, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(env or os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "fwd9m", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _manifest(*roots: Path) -> dict[str, tuple]:
    """Every entry under ``roots`` (lstat: links are not followed): kind, mode, content."""
    out: dict[str, tuple] = {}
    for root in roots:
        for d, dirs, files in os.walk(root):
            for name in dirs + files:
                p = os.path.join(d, name)
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    what: object = os.readlink(p)
                elif stat.S_ISREG(st.st_mode):
                    what = hashlib.sha256(Path(p).read_bytes()).hexdigest()
                else:
                    what = None
                out[p] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), what)
    return out


def test_check_link_puts_back_a_file_run_1_deleted_before_run_2(tmp_path: Path) -> None:
    """--cwd link: run 1 deletes a file of yours through a link to your folder; run 2
    must find it again (it failed with FileNotFoundError: the guard put back changed
    files between runs, not deleted ones), and the folder ends as it was."""
    user = tmp_path / "u"
    (user / "sub").mkdir(parents=True)
    (user / "sub" / "back").symlink_to(user)
    (user / "victim.txt").write_text("mine\n")
    (user / "s.py").write_text('import os\nos.remove("sub/back/victim.txt")\nprint("done")\n')
    before = _manifest(user)
    done = _fwd9m(["check", "--no-hashseed-check", "--cwd", "link", "s.py"], user)
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()[-2000:]
    assert _manifest(user) == before


def test_fix_write_keeps_windows_line_endings(tmp_path: Path) -> None:
    """fwd9m fix --write on a script with CRLF line endings: the lines it inserts
    (``import fwd9m``, ``enable_determinism``) end in CRLF too; they ended in LF, leaving
    a file of mixed line endings although fix promises to keep them."""
    script = tmp_path / "s.py"
    script.write_bytes(b"import random\r\nimport time\r\nrandom.seed(time.time())\r\nprint(random.random())\r\n")
    done = _fwd9m(["fix", "-q", "--write", "--timeout", "60", "s.py"], tmp_path)
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()[-2000:]
    data = script.read_bytes()
    assert b"enable_determinism" in data
    assert data.count(b"\n") == data.count(b"\r\n"), data


def test_lint_config_pipe_device_and_deep_nesting_exit_2(tmp_path: Path) -> None:
    """lint --config on a named pipe or /dev/zero hung (read until EOF), and a
    pyproject.toml with arrays nested 2,000 deep ended in a RecursionError traceback;
    each is a clear error, exit 2."""
    (tmp_path / "t.py").write_text("import random\nprint(random.random())\n")
    os.mkfifo(tmp_path / "pipe")
    for config in ("pipe", "/dev/zero"):
        done = _fwd9m(["lint", "--config", config, "t.py"], tmp_path, timeout=30)
        assert done.returncode == 2 and b"not a regular pyproject.toml" in done.stderr, done.stderr
    (tmp_path / "pyproject.toml").write_text("[tool.fwd9m.lint]\nselect = " + "[" * 2000 + "]" * 2000 + "\n")
    for args in (["lint", "t.py"], ["lint", "--config", "pyproject.toml", "t.py"]):
        done = _fwd9m(args, tmp_path, timeout=30)
        assert done.returncode == 2, done.stderr[-500:]
        assert b"Traceback" not in done.stderr and b"nested too deep" in done.stderr, done.stderr[-500:]


def test_lint_fix_file_and_link_to_it_fixed_once_and_counted_once(tmp_path: Path) -> None:
    """lint --fix on a folder holding target.py and link.py -> target.py: the file was
    fixed through the link, then its own fix was refused as "changed since it was read"
    (by fwd9m itself), and the summary still counted both: "fixed 2 findings in 2 files"."""
    (tmp_path / "target.py").write_text("import random\nimport time\nrandom.seed(time.time())\n")
    (tmp_path / "link.py").symlink_to("target.py")
    done = _fwd9m(["lint", "--extend-select", "FWD104", "--fix", "--unsafe-fixes", "."], tmp_path, timeout=60)  # opt-in
    err = done.stderr.decode()
    assert "changed since it was read" not in err, err
    assert "fixed 1 finding in 1 file" in err, err
    assert (tmp_path / "target.py").read_text() == "import random\nimport time\nrandom.seed(0)\n"
    assert os.readlink(tmp_path / "link.py") == "target.py"


def test_debug_replay_bad_capture_files_exit_2(tmp_path: Path) -> None:
    """debug replay --capture FILE: a named pipe hung, and an .npy array, an empty file,
    a damaged archive or a call nested too deep ended in a traceback (exit 1); each is
    a clear error, exit 2, before any framework starts."""
    import numpy as np

    (tmp_path / "run.trace").write_text("x\n")
    os.mkfifo(tmp_path / "pipe.npz")
    np.save(tmp_path / "arr.npy", np.arange(3))
    (tmp_path / "empty.npz").write_bytes(b"")
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04" + bytes(40))
    np.savez(tmp_path / "deep.npz", call=np.frombuffer(b"[" * 100_000, dtype=np.uint8))
    for name in ("pipe.npz", "arr.npy", "empty.npz", "bad.npz", "deep.npz", "/dev/zero"):
        done = _fwd9m(["debug", "replay", "run.trace", "--op", "3", "--capture", name], tmp_path, timeout=60)
        err = done.stderr.decode()
        assert done.returncode == 2 and "Traceback" not in err, (name, err[-800:])
        assert "not a replay capture" in err or "not a regular replay capture" in err, (name, err[-800:])


def test_probe_trace_cut_off_before_any_op_exit_2(tmp_path: Path) -> None:
    """probe --trace on a trace cut off before its first op (a copy that did not finish)
    probed nothing and said "Catalog contradictions: none", exit 0: a verdict resting on
    no op. It is refused, exit 2, saying where the trace is cut."""
    import pytest

    pytest.importorskip("torch")
    (tmp_path / "t.py").write_text(
        "import torch\ntorch.manual_seed(0)\nm = torch.nn.Linear(4, 2)\n"
        "x = torch.randn(8, 4)\nprint(m(x).sum().item())\n"
    )
    done = _fwd9m(["debug", "record", "-o", "run.trace", "t.py"], tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-1000:]
    data = (tmp_path / "run.trace").read_bytes()
    (tmp_path / "cut.trace").write_bytes(data[: len(data) - 40])
    done = _fwd9m(["probe", "--trace", "cut.trace", "--switch", "off", "-k", "2"], tmp_path, timeout=300)
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err, err[-800:]
    assert "cut off" in err and "no op to probe" in err, err[-800:]


def test_check_link_puts_back_source_and_text_files_a_run_rewrote(tmp_path: Path) -> None:
    """--cwd link: a run that rewrites config.toml, appends to notes.md or rewrites a
    helper.py in your folder left them changed for good ("could not put back ... (no copy
    of it was made)", though a copy was made); they are put back, and the changed text is
    kept in the cache folder, which the report names."""
    user = tmp_path / "u"
    (user / "sub").mkdir(parents=True)
    (user / "sub" / "back").symlink_to(user)
    (user / "config.toml").write_text("lr = 0.1\n")
    (user / "notes.md").write_text("# my notes\n")
    (user / "helper.py").write_text("X = 1\n")
    (user / "s.py").write_text(
        'open("config.toml", "w").write("lr = 0.5\\n")\n'
        'open("notes.md", "a").write("run was here\\n")\n'
        'open("sub/back/helper.py", "w").write("X = 2\\n")\nprint("ok")\n'
    )
    before = _manifest(user)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = _fwd9m(["check", "--no-hashseed-check", "--cwd", "link", "s.py"], user, env=env)
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()[-2000:]
    assert _manifest(user) == before
    assert str(tmp_path / "cache" / "fwd9m" / "changed") in out, out
    kept = list((tmp_path / "cache" / "fwd9m" / "changed").glob("*/config.toml"))
    assert kept and kept[0].read_text() == "lr = 0.5\n"


def test_link_mode_puts_back_a_large_file_the_script_overwrites_in_place(tmp_path: Path) -> None:
    """--cwd link copies the user's files before the runs up to 64 MiB each; a larger
    checkpoint that the script overwrote in place (open(..., "wb"), as torch.save does) was
    lost: fwd9m only warned it could not put it back. Now the run copies it just before it
    first opens it for writing (fwd9m._runtime.lazy_backup), and it is put back."""
    from fwd9m._runtime.workdir import BACKUP_FILE_LIMIT

    big = tmp_path / "model.ckpt"
    with open(big, "wb") as f:
        f.write(hashlib.sha256(b"x").digest() * ((BACKUP_FILE_LIMIT + (1 << 20)) // 32))
    digest = hashlib.sha256(big.read_bytes()).hexdigest()
    (tmp_path / "train.py").write_text(
        "import os\n"
        "with open('model.ckpt', 'rb') as f:\n    head = f.read(16)\n"
        "with open('model.ckpt', 'wb') as f:\n    f.write(b'new weights' + head)\n"
        "fd = os.open('model.ckpt', os.O_WRONLY | os.O_APPEND)\nos.write(fd, b'!')\nos.close(fd)\n"
        "print('saved')\n"
    )
    done = _fwd9m(["check", "--cwd", "link", "train.py"], tmp_path, timeout=300)
    err = done.stderr.decode()
    assert done.returncode == 0, done.stdout.decode() + err
    assert "could not put back" not in err, err
    assert hashlib.sha256(big.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.ckpt", "train.py"]


def test_quiet_still_warns_of_a_file_not_put_back(tmp_path: Path) -> None:
    """A large file written by C code (not through Python's open: the copy on first write
    does not see it) cannot be put back; with -q the warning saying so was not printed."""
    from fwd9m._runtime.workdir import BACKUP_FILE_LIMIT

    with open(tmp_path / "model.ckpt", "wb") as f:
        f.truncate(BACKUP_FILE_LIMIT + (1 << 20))
    (tmp_path / "train.py").write_text(
        "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.fopen.restype = ctypes.c_void_p\n"
        "f = libc.fopen(b'model.ckpt', b'w')\nlibc.fclose(ctypes.c_void_p(f))\nprint('saved')\n"
    )
    done = _fwd9m(["check", "-q", "--cwd", "link", "train.py"], tmp_path, timeout=300)
    assert "WARNING: fwd9m could not put back model.ckpt" in done.stderr.decode(), done.stderr.decode()
