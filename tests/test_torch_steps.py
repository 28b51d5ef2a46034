"""fwd9m.torch._steps: one pair of global optimizer step hooks, its subscribers called at
every step, eagerly, also when ``optimizer.step`` is compiled, and the training the same
as without them.

Before the module, each subscriber was a global hook of its own, and Dynamo traced it
inside the compiled ``step``: a plain global hook that records
``torch.compiler.is_compiling()`` saw True at each of the 3 steps (its body traced, its
effects replayed), and fwd9m's own hooks broke the graph inside fwd9m's code.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from fwd9m.torch import _steps  # noqa: E402


def _train(compiled: bool, calls: list | None = None) -> list:
    """A tiny model, SGD with momentum, 3 steps; the final parameters."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    if compiled:
        opt.step = torch.compile(opt.step)
    for _ in range(3):
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    return [p.detach().clone() for p in model.parameters()]


def _inductor_or_skip() -> None:
    if shutil.which("gcc") is None and shutil.which("cc") is None and shutil.which("clang") is None:
        pytest.skip("Inductor compiles C++ on CPU: no C compiler here")
    try:
        torch.compile(lambda t: t * 2)(torch.ones(2))
    except Exception as exc:  # noqa: BLE001 - any failure to compile: nothing to test here
        pytest.skip(f"Inductor cannot compile here: {type(exc).__name__}: {exc}")


def test_subscribers_run_eagerly_at_every_compiled_step_and_training_is_unchanged():
    _inductor_or_skip()
    torch._dynamo.reset()
    plain = _train(compiled=True)
    seen: list[tuple[str, bool, int]] = []

    def pre(optimizer, args, kwargs):
        seen.append(("pre", torch.compiler.is_compiling(), len(optimizer.state)))

    def post(optimizer, args, kwargs):
        seen.append(("post", torch.compiler.is_compiling(), len(optimizer.state)))

    sub = _steps.subscribe(pre, post)
    try:
        torch._dynamo.reset()
        hooked = _train(compiled=True)
    finally:
        sub.remove()
    # a plain global hook (no torch.compiler.disable): the same calls, each with True
    assert seen == [("pre", False, 0), ("post", False, 2)] + [("pre", False, 2), ("post", False, 2)] * 2
    assert all(torch.equal(a, b) for a, b in zip(plain, hooked))  # bit for bit


def test_subscribers_run_in_order_until_removed():
    order: list[str] = []
    a = _steps.subscribe(lambda o, a, k: order.append("a pre"), lambda o, a, k: order.append("a post"))
    b = _steps.subscribe(post=lambda o, a, k: order.append("b post"))
    try:
        _train(compiled=False)
        assert order == ["a pre", "a post", "b post"] * 3
        a.remove()
        a.remove()  # idempotent
        _train(compiled=False)
        assert order[9:] == ["b post"] * 3
    finally:
        a.remove()
        b.remove()
    _train(compiled=False)
    assert len(order) == 12


def test_step_digests_hold_the_model_weakly():
    """The digests' per-optimizer cache must not keep the model alive: a DDP model kept
    past ``destroy_process_group()`` freed its gloo group at exit and hung there under load
    (its destructor joins a thread waiting for the GIL; pytorch/pytorch#56297)."""
    import gc
    import weakref

    from fwd9m.steps import _torch as steps_torch

    model = torch.nn.Sequential(torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    names = {name for _, name, _, _ in steps_torch.initial_entries(opt)}
    assert any("0.weight" in n for n in names)
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None
    assert steps_torch.optimizer_entries(opt)  # the optimizer still gets its digests


_LAZY = """
import sys
import torch
from fwd9m.torch import _steps

seen = []
sub = _steps.subscribe(pre=lambda o, a, k: seen.append(torch.compiler.is_compiling()))
print("dynamo before compile:", "torch._dynamo" in sys.modules)
torch.manual_seed(0)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
opt.step = torch.compile(opt.step)
for _ in range(3):
    opt.zero_grad()
    model(torch.ones(3, 4)).sum().backward()
    opt.step()
print("calls:", seen)
"""


@pytest.mark.slow
def test_dynamo_is_not_imported_for_the_hooks_and_they_still_run_eagerly_once_it_is(tmp_path):
    """Subscribing imports no Dynamo (2.6 s of CPU in every torch run); a later
    ``torch.compile`` imports it, and the hook, replaced in place by its disabled form,
    runs eagerly at each compiled step (is_compiling() False), as when Dynamo was loaded first."""
    _inductor_or_skip()
    script = tmp_path / "lazy.py"
    script.write_text(_LAZY)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "dynamo before compile: False" in proc.stdout
    assert "calls: [False, False, False]" in proc.stdout, proc.stdout
