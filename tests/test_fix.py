"""``fwd9m fix``: patches made as edits of the script's text, and a patch verified by
checking a patched copy, the user's folder left as it was."""

from __future__ import annotations

import ast
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fwd9m.fix import FixResult, _edits, write


def _patched(source: str, seed: int = 0) -> str:
    tree = ast.parse(source)
    edits = _edits.enable_after_imports(source, tree, seed) + _edits.fixed_clock_seeds(source, tree, seed)
    return _edits.apply(source, edits + _edits.worker_seeding(source, tree))


def test_the_enable_call_goes_after_the_imports_and_environment_setup():
    source = (
        '"""Doc."""\n'
        "from __future__ import annotations\n"
        "import os\n"
        "os.environ.setdefault('HF_HUB_OFFLINE', '1')\n"
        "import torch  # the framework\n"
        "\n"
        "model = torch.nn.Linear(2, 2)\n"
    )
    out = _patched(source, 7)
    lines = out.splitlines()
    assert lines[4] == "import torch  # the framework"
    assert lines[5].startswith("import fwd9m") and lines[6] == "fwd9m.enable_determinism(seed=7)"
    assert lines[8] == "model = torch.nn.Linear(2, 2)"
    ast.parse(out)


def test_a_script_without_imports_gets_the_call_at_the_top():
    assert _patched("x = 1\n").splitlines()[1] == "fwd9m.enable_determinism(seed=0)"
    assert _patched('"""Doc."""\nx = 1').splitlines()[2] == "fwd9m.enable_determinism(seed=0)"


def test_clock_seeds_take_the_seed_and_the_script_seed_is_kept():
    source = (
        "import random, time\nimport jax\n"
        "random.seed(time.time())  # clock\n"
        "key = jax.random.PRNGKey(int(time.time() * 1000) % 2**31)\n"
        "torch_seed = 5\n"
    )
    out = _patched(source, 3)
    assert "random.seed(3)  # clock" in out and "key = jax.random.PRNGKey(3)" in out
    assert _edits.script_seed(ast.parse("import torch\ntorch.manual_seed(42)\n")) == 42
    assert _edits.script_seed(ast.parse("import random\nrandom.seed(time.time())\n")) is None


def test_dataloader_workers_get_the_worker_init_fn_and_other_loaders_do_not():
    source = (
        "from torch.utils.data import DataLoader\n"
        "a = DataLoader(ds, batch_size=8, num_workers=2)\n"
        "b = DataLoader(ds, num_workers=0)\n"
        "c = DataLoader(ds, num_workers=4, worker_init_fn=f)\n"
        "d = DataLoader(\n    ds,\n    num_workers=n,\n)\n"
    )
    out = _patched(source)
    assert "a = DataLoader(ds, batch_size=8, num_workers=2, worker_init_fn=fwd9m.data.worker_init_fn)" in out
    assert "b = DataLoader(ds, num_workers=0)\n" in out and "worker_init_fn=f)\n" in out
    assert "num_workers=n,\nworker_init_fn=fwd9m.data.worker_init_fn)" in out
    ast.parse(out)


def test_write_refuses_a_script_changed_since_the_check(tmp_path):
    from fwd9m.errors import RunError
    from fwd9m.fix import Attempt

    script = tmp_path / "train.py"
    script.write_text("x = 1\n")
    digest = hashlib.sha256(b"x = 1\n").hexdigest()
    attempt = Attempt("enable", "patch", 2, "REPRODUCIBLE", True, "import fwd9m\nx = 1\n")
    result = FixResult(str(script), "NOT REPRODUCIBLE", "differs", [attempt], digest)
    script.write_text("x = 2\n")
    with pytest.raises(RunError, match="changed since it was checked"):
        write(result)
    assert script.read_text() == "x = 2\n"
    script.write_text("x = 1\n")
    os.chmod(script, 0o750)
    write(result)
    assert script.read_text() == "import fwd9m\nx = 1\n" and (script.stat().st_mode & 0o777) == 0o750


def test_write_goes_through_a_linked_script_and_leaves_no_temporary_file(tmp_path):
    from fwd9m.fix import Attempt

    real = tmp_path / "src" / "train.py"
    real.parent.mkdir()
    real.write_text("x = 1\n")
    (tmp_path / "train.py").symlink_to(real)
    attempt = Attempt("enable", "patch", 2, "REPRODUCIBLE", True, "import fwd9m\nx = 1\n")
    digest = hashlib.sha256(b"x = 1\n").hexdigest()
    write(FixResult(str(tmp_path / "train.py"), "NOT REPRODUCIBLE", "differs", [attempt], digest))
    assert (tmp_path / "train.py").is_symlink() and real.read_text() == "import fwd9m\nx = 1\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["src", "train.py", "train.py"]


def test_write_keeps_the_scripts_line_endings_and_bom(tmp_path):
    from fwd9m.fix import Attempt

    script = tmp_path / "train.py"
    script.write_bytes(b"\xef\xbb\xbfx = 1\r\ny = 2\r\n")
    attempt = Attempt("enable", "patch", 2, "REPRODUCIBLE", True, "x = 1\r\nimport fwd9m\r\ny = 2\r\n")
    digest = hashlib.sha256(b"x = 1\r\ny = 2\r\n").hexdigest()
    write(FixResult(str(script), "NOT REPRODUCIBLE", "differs", [attempt], digest))
    assert script.read_bytes() == b"\xef\xbb\xbfx = 1\r\nimport fwd9m\r\ny = 2\r\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_write_that_fails_half_way_changes_no_file(tmp_path):
    from fwd9m.fix import Attempt

    (tmp_path / "train.py").write_text("import helpers\n")
    (tmp_path / "helpers.py").mkdir()  # a module that cannot be written: the script is not written either
    attempt = Attempt("enable", "patch", 2, "REPRODUCIBLE", True, "import fwd9m\nimport helpers\n", {"helpers.py": "y"})
    digest = hashlib.sha256(b"import helpers\n").hexdigest()
    result = FixResult(str(tmp_path / "train.py"), "NOT REPRODUCIBLE", "differs", [attempt], digest)
    with pytest.raises(OSError):
        write(result)
    assert (tmp_path / "train.py").read_text() == "import helpers\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["helpers.py", "train.py"]


def _fix(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    return subprocess.run(
        [sys.executable, "-m", "fwd9m", "fix", "-q", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


BROKEN = '''"""Unseeded weights and a clock-seeded shuffle; a helper module beside it."""
import random
import time

import numpy as np
import torch

from helpers import scale

random.seed(time.time())


def main():
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.from_numpy(np.random.normal(size=(32, 4)).astype("float32")) * scale()
    for step in range(3):
        idx = random.sample(range(32), 8)
        loss = model(x[idx]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save(model.state_dict(), "model.pt")
    print(f"loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
'''


def test_fix_verifies_a_patch_on_a_copy_and_leaves_the_folder_as_it_was(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "train.py").write_text(BROKEN)
    (tmp_path / "helpers.py").write_text("def scale():\n    return 2.0\n")
    before = _tree(tmp_path)
    out = _fix(tmp_path, "-o", str(tmp_path.parent / "fix.patch"), "train.py")
    assert out.returncode == 0, out.stdout + out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith("FIXED (verified)") and "REPRODUCIBLE: 2 runs of train.py agree" in first, out.stdout
    assert "+fwd9m.enable_determinism(seed=0)" in out.stdout and "+random.seed(0)" in out.stdout
    assert _tree(tmp_path) == before  # nothing written, nothing left behind
    patch = (tmp_path.parent / "fix.patch").read_text()
    assert patch.startswith("--- a/train.py\n+++ b/train.py\n")
    out = _fix(tmp_path, "--write", "train.py")
    assert out.returncode == 0 and "Written: train.py" in out.stdout, out.stdout + out.stderr
    assert "fwd9m.enable_determinism(seed=0)" in (tmp_path / "train.py").read_text()


def test_fix_on_a_reproducible_script_and_on_bad_input(tmp_path):
    (tmp_path / "ok.py").write_text("import random\nrandom.seed(1)\nprint(random.random())\n")
    out = _fix(tmp_path, "ok.py")
    assert out.returncode == 0 and out.stdout.startswith("NOTHING TO FIX: REPRODUCIBLE"), out.stdout + out.stderr
    out = _fix(tmp_path, "missing.py")
    assert out.returncode == 2 and "no such file" in out.stderr
    (tmp_path / "bad.py").write_text("def (:\n")
    out = _fix(tmp_path, "bad.py")
    assert out.returncode == 2 and "cannot fix bad.py" in out.stderr


def test_seeds_through_a_variable_generators_without_a_seed_and_sets_iterated_in_order():
    source = (
        "import time\nimport numpy as np\nimport jax\n"
        "seed = args.seed if args.seed is not None else int(time.time())\n"
        "key = jax.random.PRNGKey(seed)\n"
        "rng = np.random.default_rng()\n"
        "words = {w for w in text.split()}\n"
        "vocab = {w: i for i, w in enumerate(words)}\n"
        "for w in words:\n    pass\n"
    )
    tree = ast.parse(source)
    out = _edits.apply(
        source,
        _edits.clock_seed_variables(source, tree, 3)
        + _edits.seeded_generators(source, tree, 3)
        + _edits.sorted_sets(source, tree),
    )
    assert "seed = args.seed if args.seed is not None else 3\n" in out
    assert "rng = np.random.default_rng(3)\n" in out
    assert "enumerate(sorted(words))" in out and "for w in sorted(words):" in out
    ast.parse(out)


def test_a_local_module_is_patched_in_the_copy_never_in_the_users_folder(tmp_path):
    from fwd9m.fix import _module_edits, _patched_copy

    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("")
    seeding = "import random, time\n\ndef set_seed():\n    random.seed(int(time.time()))\n"
    (tmp_path / "helpers" / "seeding.py").write_text(seeding)
    (tmp_path / "helpers" / "other.py").write_text("x = 1\n")
    script = tmp_path / "train.py"
    script.write_text("from helpers.seeding import set_seed\nset_seed()\n")
    modules = _module_edits(script, ast.parse(script.read_text()), 0)
    assert modules == {"helpers/seeding.py": seeding.replace("int(time.time())", "0")}
    with _patched_copy(script, script.read_text(), modules) as copy:
        assert (copy.parent / "helpers" / "seeding.py").read_text() == modules["helpers/seeding.py"]
        assert (copy.parent / "helpers" / "other.py").is_symlink()
    assert (tmp_path / "helpers" / "seeding.py").read_text() == seeding  # the user's file as it was


@pytest.mark.parametrize("output", ["train.py", "notes.txt", "sub"])
def test_o_never_overwrites_the_script_or_a_file_that_is_not_a_patch(tmp_path, output):
    (tmp_path / "train.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / "sub").mkdir()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    r = _fix(tmp_path, "-o", output, "train.py")
    assert r.returncode == 2 and "-o" in r.stderr, r.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_the_next_step_is_the_group_that_what_still_differs_points_at(tmp_path):
    from fwd9m.fix import _groups, _next_group

    source = (
        "import random, time\nimport numpy as np\n"
        "random.seed(time.time())\n"
        "rng = np.random.default_rng()\n"
        "words = {'a', 'b'}\n"
        "for w in words:\n    print(w, rng.random())\n"
    )
    script = tmp_path / "train.py"
    script.write_text(source)
    groups = _groups(script, source, 5)
    assert (
        groups[0].what
        == "fwd9m.enable_determinism(seed=5) after the imports, the clock seed at train.py:3 replaced by 5"
    )
    assert [g.what for g in groups[1:]] == [
        "sorted() over the set at train.py:6",
        "the generator at train.py:4 given seed 5",
    ]
    rest = groups[1:]
    assert _next_group(rest, "stdout: 2 of 2 lines differ; pythonhashseed (confirmed)") is rest[0]
    assert _next_group(list(reversed(rest)), "stdout: a line differs") is rest[1]  # nothing points: the first left


TWO_SOURCES = '''"""Two sources: an unseeded NumPy draw and a set of strings whose order is printed."""
import numpy as np

words = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}
for w in words:
    print(w)
print(np.random.normal(size=3))
'''


def test_two_sources_are_fixed_in_two_steps_each_reported(tmp_path):
    pytest.importorskip("numpy")
    (tmp_path / "train.py").write_text(TWO_SOURCES)
    before = _tree(tmp_path)
    out = _fix(tmp_path, "train.py")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("FIXED (verified): with the patch below (2 step(s);"), out.stdout
    steps = [line for line in out.stdout.splitlines() if line.startswith("step ")]
    assert len(steps) == 2 and steps[0].split(": ", 2)[2].startswith("still differs: "), out.stdout
    assert steps[1].endswith(": REPRODUCIBLE"), out.stdout  # the hash order first (the check points at it), or the seed
    assert {s.split(": ")[1] for s in steps} == {
        "sorted() over the set at train.py:5",
        "fwd9m.enable_determinism(seed=0) after the imports",
    }, out.stdout
    assert "+for w in sorted(words):" in out.stdout and "+fwd9m.enable_determinism(seed=0)" in out.stdout
    assert _tree(tmp_path) == before


def test_no_verified_fix_says_what_each_step_left(tmp_path):
    (tmp_path / "train.py").write_text("import os\nprint(int.from_bytes(os.urandom(2), 'big') % 1000 + 1000)\n")
    out = _fix(tmp_path, "--format", "json", "train.py")
    assert out.returncode == 1, out.stdout + out.stderr
    import json

    data = json.loads(out.stdout)
    assert not data["fixed"] and len(data["attempts"]) == 1 and data["attempts"][0]["left"]
    assert data["steps"][0].startswith("step 1: fwd9m.enable_determinism(seed=0) after the imports: still differs: ")


def test_a_clock_seed_and_an_unseeded_generator_in_a_local_module(tmp_path):
    pytest.importorskip("numpy")
    (tmp_path / "noise.py").write_text(
        "import numpy as np\n\n\ndef jitter():\n    return np.random.default_rng().random()\n"
    )
    (tmp_path / "train.py").write_text(
        "import random\nimport time\n\nfrom noise import jitter\n\n"
        "random.seed(time.time())\nprint(random.random(), jitter())\n"
    )
    before = _tree(tmp_path)
    out = _fix(tmp_path, "train.py")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "the clock seed at train.py:6 replaced by 0: still differs: " in out.stdout, out.stdout
    assert "step 2: seeds from the clock or the OS fixed in noise.py: REPRODUCIBLE" in out.stdout, out.stdout
    assert "--- a/noise.py" in out.stdout and "+    return np.random.default_rng(0).random()" in out.stdout
    assert _tree(tmp_path) == before
    out = _fix(tmp_path, "--write", "train.py")
    assert out.returncode == 0 and "default_rng(0)" in (tmp_path / "noise.py").read_text(), out.stdout + out.stderr


def test_a_script_whose_only_source_is_the_hash_order_gets_sorted_alone(tmp_path):
    (tmp_path / "train.py").write_text(
        'words = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}\n'
        'with open("out.txt", "w") as f:\n    for w in words:\n        f.write(w + "\\n")\n'
    )
    out = _fix(tmp_path, "train.py")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "(1 step(s); 1 changed line(s))" in out.stdout.splitlines()[0], out.stdout
    assert (
        "step 1: sorted() over the set at train.py:3: REPRODUCIBLE" in out.stdout
        and "enable_determinism" not in out.stdout
    )


@pytest.mark.parametrize("seed", ["int(started)", "int(started // 10)"])
def test_a_clock_seed_left_in_the_patched_copy_never_verifies(tmp_path, seed):
    """The clock reaches the seed through two variables: the patch (the seeding call)
    leaves it there. Runs a second apart, or ten (a seed that changes every 10 s), read
    another seed all the same (each run's clock is moved: fwd9m._runtime.clock), so
    neither the check of the script nor that of the copy agrees by chance."""
    pytest.importorskip("numpy")
    (tmp_path / "train.py").write_text(
        f"import time\n\nimport numpy as np\n\nstarted = time.time()\nseed = {seed}\n"
        "np.random.seed(seed)\nweights = np.random.rand(4)\n"
    )
    out = _fix(tmp_path, "train.py")
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.startswith("NO VERIFIED FIX") and "Before: NOT REPRODUCIBLE" in out.stdout, out.stdout
    assert "step 1: fwd9m.enable_determinism(seed=0) after the imports: still differs: " in out.stdout, out.stdout


PUT_OVERWRITE = '''"""Unseeded weights, and put_(accumulate=False) with repeated indices on 2 CPU threads."""
import torch

torch.set_num_threads(2)

weights = torch.randn(8)  # no seed
slots = torch.zeros(8)
for step in range(3):
    index = torch.randint(0, 8, (1_000_000,))
    slots.put_(index, torch.randn(1_000_000), accumulate=False)
    print(step, (slots * weights).sum().item())
'''


def test_an_op_without_a_deterministic_kernel_gets_no_patch_and_the_best_measured_option(tmp_path):
    """put_(accumulate=False) raises under the switch on every device (the catalog's
    torch.put-overwrite): fix says there is no patch, names the catalog's entry and its
    replacement, and measures one CPU thread with the switch in warn-only mode (its time
    per run against the copy's without it, both run here)."""
    pytest.importorskip("torch")
    (tmp_path / "train.py").write_text(PUT_OVERWRITE)
    before = _tree(tmp_path)
    out = _fix(tmp_path, "train.py")
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("NO PATCH POSSIBLE: put_ has no deterministic implementation on this device"), lines
    assert lines[1].startswith("catalog torch.put-overwrite (accumulate=False): ") and "index_put_" in lines[2]
    assert "the patched copy gave no verdict: train.py failed in every run (exit 1): RuntimeError: put_" in out.stdout
    best = next(line for line in lines if line.startswith("Best measured option: "))
    assert (
        "one CPU thread (torch.set_num_threads(1)), the switch in warn-only mode: fwd9m check says REPRODUCIBLE" in best
    )
    assert " s per run instead of " in best and "x)." in best, best
    assert (
        "+fwd9m.enable_determinism(seed=0, warn_only=True)" in out.stdout and "+torch.set_num_threads(1)" in out.stdout
    )
    assert _tree(tmp_path) == before


def test_one_thread_replaces_the_scripts_thread_count_or_is_added_after_the_imports():
    script = "import torch\n\ntorch.set_num_threads(4)\nx = 1\n"
    assert _edits.apply(script, _edits.one_thread(script, ast.parse(script))) == script.replace("(4)", "(1)")
    script = "import torch\nimport numpy\n\nx = 1\n"
    patched = _edits.apply(script, _edits.one_thread(script, ast.parse(script)))
    assert patched.splitlines()[2].startswith("torch.set_num_threads(1)  # fwd9m fix")
    assert _edits.one_thread("import numpy\n", ast.parse("import numpy\n")) == []  # no torch: no edit
