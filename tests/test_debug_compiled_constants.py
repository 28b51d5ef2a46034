"""Compiled code that captures an unseeded Python constant (issue 27, case 3): a float
drawn from ``random`` that a ``torch.compile``d or ``tf.function(jit_compile=True)``
function closes over is baked into the compiled code, so ``fwd9m debug`` digests the
code's constants as the call's arguments: a value entering from outside (EXTERNAL,
"argument 'constant...' differs"), as for a plain ``tf.function`` or ``jax.jit``, not a
nondeterministic compiled graph with ``enable_determinism`` as its fix."""

from __future__ import annotations

import pytest
from conftest import debug_script as _debug

TORCH_COMPILE = """\
import random

import torch

torch.manual_seed(0)
scale = random.random()  # unseeded Python constant


@torch.compile
def f(x):
    return x * scale + 1.0


print(f(torch.ones(4)))
"""

XLA = """\
import random

import tensorflow as tf

tf.random.set_seed(0)
scale = random.random()  # unseeded Python constant


@tf.function(jit_compile=True)
def f(x):
    return x * scale + 1.0


print(f(tf.ones([4])).numpy())
"""


def _external(code: int, lines: list[str], op: str) -> str:
    report = "\n".join(lines)
    assert code == 1, report
    assert lines[0].startswith("EXTERNAL SOURCE (python): first divergence at op #1 "), report
    assert lines[1] == (
        f"  a Python value baked into the compiled code of {op} (a constant it closes over: "
        "a global or a closure variable) differs between the runs"
    ), report
    assert lines[2].startswith(f"  op:       {op}  ("), report
    assert "fwd9m.seed_everything(0)" in report and "enable_determinism" not in report
    assert "CULPRIT" not in report and "replay of op" not in report
    return report


def test_torch_compile_closing_over_an_unseeded_float_is_external(tmp_path):
    pytest.importorskip("torch")
    code, lines = _debug(tmp_path, "tc.py", TORCH_COMPILE)
    report = _external(code, lines, "torch.compile:f")
    assert lines[4] == "  location: tc.py:9", report
    assert lines[5].startswith("  why:      argument 'constants' of torch.compile:f: '0."), report
    assert ",1.0' vs '0." in lines[5], report


def test_xla_function_closing_over_an_unseeded_float_is_external(tmp_path):
    pytest.importorskip("tensorflow")
    code, lines = _debug(tmp_path, "xf.py", XLA)
    report = _external(code, lines, "xla:f")
    assert lines[5] == "  location: xf.py:14", report
    assert lines[6].startswith("  why:      argument 'constant mul/y' of xla:f: 0."), report
