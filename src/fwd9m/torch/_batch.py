"""PyTorch side of :mod:`fwd9m.batch`: taking rows, the model's first forward call in a
script, inference mode, and the op recorder of ``fwd9m debug --vary batch``."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

from .._recording._common import user_location

FRAMEWORK = "torch"


def is_array(x: Any) -> bool:
    import torch

    return isinstance(x, torch.Tensor)


def take(x: Any, index: list[int], dim: int) -> Any:
    """Rows ``index`` of ``x`` along ``dim`` (a new tensor)."""
    import torch

    return torch.index_select(x, dim, torch.as_tensor(index, dtype=torch.long, device=x.device))


@contextlib.contextmanager
def inference(model: Any):
    """No autograd, and a module in eval mode (dropout off), put back as it was after."""
    import torch

    training = getattr(model, "training", None)
    if isinstance(model, torch.nn.Module):
        model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        if isinstance(model, torch.nn.Module) and training:
            model.train(training)


def first_call(on_call: Callable[[Any, tuple, dict], None]) -> Callable[[], None]:
    """Call ``on_call(module, args, kwargs)`` at the first call of an outermost
    ``nn.Module`` (one not called from inside another module's call) that may be the
    model (:func:`_may_be_model`), before it runs; ``on_call`` may raise to stop the
    program there. Returns the function undoing it."""
    import torch

    cls = torch.nn.Module
    original = cls.__call__
    depth = [0]

    def call(self, *args, **kwargs):
        if depth[0] == 0 and _may_be_model(self):
            on_call(self, args, kwargs)
        depth[0] += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            depth[0] -= 1

    cls.__call__ = call

    def undo() -> None:
        cls.__call__ = original

    return undo


def _may_be_model(module: Any) -> bool:
    """Not a data transform: a module with parameters or buffers (a ``Normalize`` or
    ``Resize`` transform has none), called from outside ``torch.utils.data`` (a
    Dataset's ``__getitem__`` run by a DataLoader: its modules prepare samples)."""
    if next(module.parameters(), None) is None and next(module.buffers(), None) is None:
        return False
    frame = sys._getframe(2)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("torch.utils.data"):
            return False
        frame = frame.f_back
    return True


def model_name(model: Any) -> str:
    return type(model).__qualname__


# ------------------------------------------------------------------ op recording


class OpRecorder:
    """Every aten op of calls made inside ``with recorder:``, as the recorder sees it:
    its name, the module path it ran in, the user's line, and its tensor inputs and
    outputs as NumPy arrays (``keep``: the op numbers whose arguments are kept as they
    were, for a replay)."""

    def __init__(self, model: Any, keep: int | None = None):
        self.model, self.keep = model, keep
        self.ops: list[dict] = []
        self.kept: tuple | None = None
        self._path: list[str] = []
        self._handles: list = []
        self._mode = None

    def __enter__(self):
        from torch.nn.modules import module as mod

        from ._private import dispatch_mode

        names = {id(m): n for n, m in self.model.named_modules()} if hasattr(self.model, "named_modules") else {}

        def pre(module, args):
            self._path.append((names.get(id(module), ""), type(module).__name__))

        def post(module, args, output):
            if self._path:
                self._path.pop()

        self._handles = [
            mod.register_module_forward_pre_hook(pre),
            mod.register_module_forward_hook(post, always_call=True),
        ]
        self._mode = dispatch_mode(self._on_op, compiled=False)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)
        for h in self._handles:
            h.remove()

    def _module(self) -> str:
        """The innermost module's path and type: ``blocks.0.attn (Linear)``."""
        if not self._path:
            return ""
        name, kind = self._path[-1]
        return f"{name} ({kind})" if name else kind

    def _on_op(self, func, args, kwargs):
        import torch

        if self.keep == len(self.ops):
            self.kept = (func, _clone(args, torch), _clone(kwargs, torch))
        out = func(*args, **kwargs)
        flat_in = _tensors((args, kwargs), torch)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        self.ops.append(
            {
                "op": f"{func.namespace}::{func.__name__}",  # public OpOverload API: aten::addmm.default
                "module": self._module(),
                "location": user_location(3),
                "inputs": [_numpy(t) for t in flat_in],
                "outputs": [_numpy(t) for t in outs if isinstance(t, torch.Tensor)],
            }
        )
        return out


def _tensors(x, torch) -> list:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v, torch)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v, torch)]
    return []


def _clone(x, torch):
    if isinstance(x, torch.Tensor):
        return x.detach().clone()
    if isinstance(x, (list, tuple)):
        return type(x)(_clone(v, torch) for v in x)
    if isinstance(x, dict):
        return {k: _clone(v, torch) for k, v in x.items()}
    return x


def _numpy(t):
    from ._backend import _array

    try:
        return _array(t.detach()).array
    except Exception:  # noqa: BLE001 - a tensor with no NumPy view (sparse, meta) is left out
        return None


def replay(kept: tuple, times: int) -> list[list]:
    """Run a kept op ``times`` times alone on copies of its inputs: its tensor outputs
    (NumPy) each time."""
    import torch

    func, args, kwargs = kept
    results = []
    with torch.no_grad():
        for _ in range(times):
            out = func(*_clone(args, torch), **_clone(kwargs, torch))
            outs = out if isinstance(out, (tuple, list)) else (out,)
            results.append([_numpy(t) for t in outs if isinstance(t, torch.Tensor)])
    return results


def concrete(args: tuple, kwargs: dict) -> bool:
    """The call holds at least one tensor with values (not a meta or fake tensor)."""
    import torch

    tensors = _tensors((args, kwargs), torch)
    return any(t.device.type != "meta" for t in tensors)


def probe_ops() -> dict[str, Callable]:
    """Ops measured by ``fwd9m probe --batch-invariance``: name -> fn(NumPy samples) -> NumPy rows."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    w, b = torch.randn(512, 512, generator=g), torch.randn(512, generator=g)
    ln = (torch.randn(512, generator=g), torch.randn(512, generator=g))

    def run(f):
        def call(x):
            with torch.no_grad():
                return f(torch.from_numpy(x)).numpy()

        return call

    return {
        "matmul": run(lambda x: x @ w),
        "linear": run(lambda x: F.linear(x, w, b)),
        "sum": run(lambda x: x.sum(-1)),
        "mean": run(lambda x: x.mean(-1)),
        "softmax": run(lambda x: torch.softmax(x, -1)),
        "layer_norm": run(lambda x: F.layer_norm(x, (512,), *ln)),
        "attention": run(lambda x: F.scaled_dot_product_attention(*(x.view(x.shape[0], 8, 8, 8),) * 3)),
    }
