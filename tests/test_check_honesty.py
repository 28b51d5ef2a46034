"""No silent false REPRODUCIBLE from ``fwd9m check``, written as users write scripts:
results logged to stderr, a timing beside a result on one line, a verdict that rests on
printed text only; and no false NOT REPRODUCIBLE from the frameworks' own stderr."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _check(tmp_path, script: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "train.py").write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    return subprocess.run(
        [sys.executable, "-m", "fwd9m", "check", "-q", "--no-hashseed-check", *args, "train.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_result_logged_to_stderr_is_compared(tmp_path):
    out = _check(
        tmp_path,
        "import logging, random\nlogging.basicConfig(level=logging.INFO)\n"
        "logging.info('final loss %.4f', random.random())\nprint('done')\n",
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "[stderr, run 2] stderr: 1 of 1 lines differ" in out.stdout and "INFO:root:final loss" in out.stdout


def test_the_frameworks_own_stderr_lines_are_left_out_and_listed(tmp_path):
    """C++ log lines (clock, thread id) and absl's Python log prefix differ in every run;
    the message of an absl line is compared."""
    script = (
        "import os, sys, time\n"
        "t = time.time()\n"
        "sys.stderr.write(f'I0000 00:00:{t:.6f}   {os.getpid()} port.cc:153] oneDNN custom operations are on.\\n')\n"
        "sys.stderr.write(f'[W1202 09:42:{int(t) % 60:02d}.{os.getpid()} socket.cpp:752] [c10d] hostname\\n')\n"
        "sys.stderr.write(f'I1202 09:42:{int(t) % 60:02d}.123456 {os.getpid()} train.py:12] loss=VALUE\\n')\n"
        "print('done')\n"
    )
    out = _check(tmp_path, script.replace("VALUE", "0.5"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 stderr line" in out.stdout.splitlines()[0] and "C++ log line of a framework" in out.stdout
    out = _check(tmp_path, script.replace("VALUE", "{t}"))
    assert out.returncode == 1 and "[stderr, run 2]" in out.stdout, out.stdout


@pytest.mark.parametrize("sep", ["|", "&", ":", "/", ", "])
def test_a_timing_beside_a_result_never_hides_it(tmp_path, sep):
    out = _check(tmp_path, f"import random\nprint(f'epoch 1{sep}time=0.52{sep}loss={{random.random():.4f}}')\n")
    assert out.returncode == 1, out.stdout + out.stderr


def test_a_verdict_on_printed_text_only_says_so_in_its_first_line(tmp_path):
    script = (
        "import random\n"
        "def main():\n"
        "    random.seed(0)\n"
        "    print('trained', sum(random.random() for _ in range(10)) > 0)\n"
        "main()\n"
    )
    out = _check(tmp_path, script)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "the verdict rests on printed text only" in out.stdout.splitlines()[0]
    assert "  final state: none found at exit" in out.stdout and "  files: none written" in out.stdout


def test_arrays_held_in_the_entry_functions_locals_are_compared(tmp_path):
    """Manual SGD on raw tensors in main(), nothing global, nothing saved: the weights are
    main()'s locals, captured when main() has returned."""
    script = (
        "import numpy as np\n"
        "import torch\n"
        "def main():\n"
        "    torch.manual_seed(0)\n"
        "    x = torch.randn(64, 8)\n"
        "    y = x @ torch.randn(8, 1)\n"
        "    w = torch.from_numpy(np.random.normal(size=(8, 1)).astype('float32')).requires_grad_()\n"
        "    for step in range(50):\n"
        "        loss = ((x @ w - y) ** 2).mean()\n"
        "        loss.backward()\n"
        "        with torch.no_grad():\n"
        "            w -= 0.01 * w.grad\n"
        "            w.grad.zero_()\n"
        "    print('trained')\n"
        "if __name__ == '__main__':\n"
        "    main()\n"
    )
    out = _check(tmp_path, script)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "[state, run 2] locals.main().w (float32, 8x1)" in out.stdout, out.stdout
    assert "final state: " in out.stdout and "main(): w" in out.stdout


def test_jax_params_in_the_entry_functions_locals_are_compared(tmp_path):
    script = (
        "import time\n"
        "import jax, jax.numpy as jnp\n"
        "def main():\n"
        "    key = jax.random.PRNGKey(int(time.time() * 1e6) % 2**31)  # a clock seed\n"
        "    params = {'w': jax.random.normal(key, (4, 4)), 'b': jnp.zeros(4)}\n"
        "    for _ in range(3):\n"
        "        params = jax.tree_util.tree_map(lambda p: p * 0.9, params)\n"
        "    print('done')\n"
        "main()\n"
    )
    out = _check(tmp_path, script)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "locals.main().params.w" in out.stdout, out.stdout


# one script for the two tests of torch state in globals (one `fwd9m check`, not two):
# unseeded tensors in a global dict (drawn before anything seeds torch), a module's
# non-persistent buffer and a quantized tensor's scale
TORCH_GLOBALS = (
    "import random\n"
    "import torch\n"
    "params = {'w': torch.randn(3)}\n"
    "class Net(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        torch.manual_seed(0)\n"
    "        self.fc = torch.nn.Linear(2, 2)\n"
    "        self.register_buffer('running', torch.full((2,), random.random()), persistent=False)\n"
    "net = Net()\n"
    "q = torch.quantize_per_tensor(torch.tensor([1.0, 2.0]), 0.1 + random.random() * 1e-9, 0, torch.qint8)\n"
    "print('done')\n"
)


@pytest.fixture(scope="module")
def torch_globals(tmp_path_factory) -> subprocess.CompletedProcess:
    pytest.importorskip("torch")
    return _check(tmp_path_factory.mktemp("torch_globals"), TORCH_GLOBALS)


def test_non_persistent_buffers_and_quantization_are_compared(torch_globals):
    out = torch_globals
    assert out.returncode == 1, out.stdout + out.stderr
    assert "net.running (float32, 2)" in out.stdout and "q.scale" in out.stdout, out.stdout


def test_a_lookup_vocabulary_built_from_a_set_is_compared(tmp_path):
    script = (
        "import keras\n"
        "keras.utils.set_random_seed(0)\n"
        "words = {'apple', 'banana', 'cherry', 'date', 'elder', 'fig', 'grape'}\n"
        "lookup = keras.layers.StringLookup(vocabulary=list(words))\n"
        "print('built')\n"
    )
    out = _check(tmp_path, script)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "lookup.string_lookup/vocabulary" in out.stdout, out.stdout


def test_deep_nesting_and_slots_objects_are_compared(tmp_path):
    script = (
        "import random\n"
        "import numpy as np\n"
        "class Point:\n"
        "    __slots__ = ('x', 'y')\n"
        "    def __init__(self):\n"
        "        self.x, self.y = np.zeros(2), np.full(2, random.random())\n"
        "state = {'point': Point()}\n"
        "deep = [np.zeros(1)]\n"
        "for _ in range(100):\n"
        "    deep = [deep]\n"
        "deep[0]\n"
        "tip = deep\n"
        "for _ in range(100):\n"
        "    tip = tip[0]\n"
        "tip[0] = np.full(1, random.random())\n"
        "print('done')\n"
    )
    out = _check(tmp_path, script)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "state.point.y (float64, 2)" in out.stdout and "deep[0][0]" in out.stdout, out.stdout


@pytest.mark.parametrize(
    "make, named",
    [
        ("(x for x in range(3))", "generator"),
        ("map(float, [1, 2])", "builtins.map"),
        ("np.random.default_rng()", "Generator"),
        ("random.Random()", "random.Random"),
        ("{'rng': np.random.RandomState(0)}", "RandomState"),
        ("[1.0, iter([1])]", "list_iterator"),
    ],
)
def test_the_api_refuses_what_it_cannot_compare(make, named):
    import random

    import numpy as np

    from fwd9m import check
    from fwd9m.errors import UncomparableError

    with pytest.raises(UncomparableError, match=named) as e:
        check(lambda: eval(make, {"np": np, "random": random}))
    assert isinstance(e.value, TypeError) and "return" in str(e.value)


def test_a_masked_array_whose_mask_differs_differs():
    import numpy as np

    from fwd9m import check

    masks = iter([[True, False], [False, True], [True, False]])
    assert not check(lambda: np.ma.masked_array([1.0, 2.0], mask=next(masks)))


def test_the_marker_fails_a_test_that_returns_nothing(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "import pytest\n\n@pytest.mark.reproducible\ndef test_trains():\n    x = 1 + 1\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_x.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 1 and "returned None, so there is nothing to compare" in out.stdout, out.stdout


def test_state_is_captured_after_threads_and_atexit_handlers(tmp_path):
    """A seeded training in a non-daemon thread that outlives the script, and a result
    saved in an atexit handler: captured when the program is over, as the interpreter ends."""
    script = (
        "import atexit, threading, time\n"
        "import numpy as np\n"
        "w = np.zeros(3)\n"
        "def train():\n"
        "    time.sleep(0.5)\n"
        "    w[:] = np.random.default_rng(SEED).standard_normal(3)\n"
        "threading.Thread(target=train).start()\n"
        "atexit.register(lambda: np.save('final.npy', w))\n"
    )
    out = _check(tmp_path, script.replace("SEED", "0"))
    assert out.returncode == 0 and "1 file" in out.stdout.splitlines()[0], out.stdout + out.stderr
    out = _check(tmp_path, script.replace("SEED", ""))
    assert out.returncode == 1 and "globals.w" in out.stdout and "final.npy" in out.stdout, out.stdout


CKPT_SCRIPT = """\
import json, os, sys
import torch
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
os.makedirs("ckpt", exist_ok=True)
json.dump({"lr": 0.1}, open("config.json", "w"))  # written at start: not a checkpoint
open("train.log", "w").write("start\\n")
start = 0
if "--resume" in sys.argv and os.path.exists("ckpt/last.pt"):
    state = torch.load("ckpt/last.pt")
    model.load_state_dict(state["model"]); opt.load_state_dict(state["opt"]); start = state["step"] + 1
    torch.set_rng_state(state["rng"])
for step in range(start, 30):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 10 == 9:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "rng": torch.get_rng_state()}, "ckpt/last.pt")
print("final", model.weight.sum().item())
"""


def test_resume_waits_for_a_checkpoint_not_for_any_new_file_and_takes_dashed_args(tmp_path):
    """--interrupt-after checkpoint (the default) fired on the config.json written at
    start, so run C had nothing to resume from; --resume-args "--resume" (as the docs
    write it) was refused by argparse."""
    pytest.importorskip("torch")
    out = _check(tmp_path, CKPT_SCRIPT, "--resume", "--resume-args", "--resume")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("RESUMES EXACTLY") and "resumed from step 10" in out.stdout, out.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]  # the runs' files: not in the folder


def test_raw_tensors_in_a_global_dict_are_compared(torch_globals):
    """Tensors that no model holds are state too: a dict of unseeded torch tensors."""
    out = torch_globals
    assert out.returncode == 1, out.stdout + out.stderr
    assert "[state, run 2] globals.params.w (float32, 3)" in out.stdout, out.stdout


def test_a_long_value_compared_whole_and_what_is_seen_by_type_only_is_listed(tmp_path):
    """A set compared by its items (sorted: the string-hash seed orders a set), beyond
    the first 200 characters; a lock held beside the arrays is listed as compared by
    type only."""
    script = (
        "import random, threading\n"
        "import numpy as np\n"
        "state = {\n"
        "    'labels': {f'label_{i:04d}' for i in range(40)} | {f'last_{random.random()}'},\n"
        "    'lock': threading.Lock(),\n"
        "    'w': np.zeros(2),\n"
        "}\n"
        "print('done')\n"
    )
    out = _check(tmp_path, script)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "[state, run 2] globals.state.labels: value differs" in out.stdout, out.stdout
    assert "seen, compared by type only: 1 value (globals.state.lock (_thread.lock))" in out.stdout, out.stdout


def test_locals_captured_in_one_run_only_are_not_a_difference():
    """Whether the watcher saw a short function's frame is timing: its locals in one run
    only are listed as not compared, not reported as a difference."""
    import numpy as np

    from fwd9m.check._runs import _state_findings

    class Run:
        def __init__(self, flat):
            from fwd9m.compare import Tensor

            arrays = {k: Tensor(np.asarray(v), "float64") for k, v in flat.items()}
            self.captures = [{"flat": arrays, "argv": ["train.py"], "rank": None}]
            self.replacements = ()

    a = Run({"globals.w": [1.0], "locals.setup().x": [2.0], "locals.main().w": [3.0]})
    b = Run({"globals.w": [1.0], "locals.main().w": [4.0]})
    notes: list[str] = []
    found = _state_findings(a, b, "run 2", notes)
    assert [f.diff.path for f in found] == ["locals.main().w"]
    assert notes and "the locals of setup(), captured in one run only" in notes[0]
