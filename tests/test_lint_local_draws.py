"""FWD109 through a local module: a script that seeds NumPy (or nothing) but uses a class
of its own package that draws from Python's ``random`` (keras-rl's ``SequentialMemory``
samples replay batches with ``random.sample``; issue 29, sixth held-out round's recall)."""

from __future__ import annotations

from fwd9m import lint
from fwd9m.lint import Config

_MEMORY = (
    "import random\n\ndef sample_batch_indexes(low, high, size):\n"
    "    return random.sample(range(low, high), size)\n\n"
    "class SequentialMemory:\n    def sample(self, n):\n"
    "        return sample_batch_indexes(0, 100, n)\n\n"
    "class RingBuffer:\n    def append(self, x):\n        pass\n"
)
_SCRIPT = (
    "import numpy as np\nfrom rl.memory import {name}\n\nnp.random.seed(123)\n"
    "memory = {name}()\nagent.fit(env, nb_steps=1000)\n"
)


def _found(tmp_path, script: str) -> list[tuple[str, int]]:
    (tmp_path / "rl").mkdir()
    (tmp_path / "rl" / "__init__.py").write_text("")
    (tmp_path / "rl" / "memory.py").write_text(_MEMORY)
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "dqn.py").write_text(script)
    report = lint.lint_paths([tmp_path], Config(select=["FWD109"]))
    return [(f.path.rsplit("/", 1)[-1], f.line) for f in report.findings if f.code == "FWD109"]


def test_a_local_class_that_draws_from_python_random(tmp_path):
    assert _found(tmp_path, _SCRIPT.format(name="SequentialMemory")) == [("dqn.py", 5)]


def test_a_local_class_that_draws_nothing(tmp_path):
    assert _found(tmp_path, _SCRIPT.format(name="RingBuffer")) == []


def test_the_script_seeds_python_random(tmp_path):
    script = _SCRIPT.format(name="SequentialMemory").replace(
        "np.random.seed(123)\n", "np.random.seed(123)\nrandom.seed(123)\n"
    )
    assert _found(tmp_path, "import random\n" + script) == []
