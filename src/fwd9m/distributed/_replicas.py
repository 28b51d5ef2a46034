"""Replica consistency: do replicas that should hold identical tensors still do?

Data-parallel training keeps one copy of the model per replica and relies on every
copy receiving the same update. Copies drift apart silently when something is not
synchronised: BatchNorm running statistics (each rank sees its own shard; DDP only
copies rank 0's buffers at the start of the next ``forward``: ``forward_sync_buffers``
/ ``broadcast_buffers`` in
https://github.com/pytorch/pytorch/blob/main/torch/nn/parallel/distributed.py), a
parameter updated outside the all-reduce, a rank-dependent seed where a shared one
was needed.

:func:`check_replicas` digests every parameter and buffer with
:mod:`fwd9m.fingerprint` (exact 64-bit digests of the bytes) on each replica, gathers
the digests and lists the tensors whose replicas disagree, in model order.

- PyTorch: one replica per rank; call it on every rank at the same point (it is a
  collective: ``torch.distributed.all_gather_object`` of the digests, plus one
  all-gather of the first differing tensor to measure the difference). With NCCL, set
  the CUDA device of each rank first (``torch.cuda.set_device``), as
  ``all_gather_object`` requires.
- TensorFlow/Keras under ``tf.distribute.MirroredStrategy``: one replica per device in
  this process; every mirrored variable's per-device components are compared.
  ``ON_READ`` variables (metrics, and anything aggregated when read) differ by design
  and are skipped.
"""

from __future__ import annotations

import sys
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._log import logger
from ..errors import Fwd9mWarning, NondeterminismError

__all__ = [
    "ReplicaDiff",
    "ReplicaReport",
    "check_replicas",
    "ReplicaMonitor",
    "watch_replicas",
    "keras_callback",
    "ENV_CHECK_REPLICAS",
    "install_from_env",
]

#: ``fwd9m run --check-replicas N`` sets it to ``N``: every rank checks its replicas
#: after every ``N``-th optimizer step and raises at the first divergence.
ENV_CHECK_REPLICAS = "FWD9M_CHECK_REPLICAS"
#: tensors larger than this (elements) are not gathered to measure the difference
DETAIL_LIMIT = 1 << 20


@dataclass(frozen=True)
class ReplicaDiff:
    """One tensor whose replicas disagree.

    ``groups``: replica indices grouped by equal digest, largest group first (ties:
    the group holding replica 0 first); ``digests``: each replica's digest (None where
    the tensor is missing). ``max_abs``: the largest absolute difference between a
    replica and replica ``groups[0][0]`` (None when not measured).
    """

    name: str
    kind: str  # "parameter" | "buffer" | "variable"
    dtype: str
    shape: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]
    digests: tuple[int | None, ...]
    max_abs: float | None = None

    def summary(self, unit: str = "rank") -> str:
        def names(g):
            return f"{unit}{'s' if len(g) > 1 else ''} {', '.join(map(str, g))}"

        what = f"{self.kind} '{self.name}' ({self.dtype} {list(self.shape)})"
        missing = [i for i, d in enumerate(self.digests) if d is None]
        if missing:
            return f"{what}: missing on {names(missing)}"
        rest = "; ".join(names(g) for g in self.groups[1:])
        s = (
            f"{what}: {rest} differ{'s' if len(self.groups) == 2 and len(self.groups[1]) == 1 else ''} "
            f"from {names(self.groups[0])}"
        )
        if self.max_abs is not None:
            s += f" (max |difference| {self.max_abs:.3g})"
        return s

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "groups": [list(g) for g in self.groups],
            "digests": [None if d is None else f"{d:016x}" for d in self.digests],
            "max_abs": self.max_abs,
        }


@dataclass
class ReplicaReport:
    """Result of :func:`check_replicas`; truthy when every replica agrees.

    ``replicas``: labels of the replicas (``"rank 0"``... or TF device names);
    ``checked``: tensors compared; ``skipped``: names not compared (ON_READ variables);
    ``diffs``: disagreeing tensors in model order (``first`` is the first of them).
    """

    step: int | None
    replicas: list[str]
    checked: int
    diffs: list[ReplicaDiff] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unit: str = "rank"

    @property
    def consistent(self) -> bool:
        return not self.diffs

    def __bool__(self) -> bool:
        return self.consistent

    @property
    def first(self) -> ReplicaDiff | None:
        return self.diffs[0] if self.diffs else None

    def render(self, limit: int = 10) -> str:
        at = f" at step {self.step}" if self.step is not None else ""
        n = len(self.replicas)
        if self.consistent:
            return f"REPLICAS CONSISTENT{at}: {self.checked} tensors identical on {n} {self.unit}s."
        lines = [
            f"REPLICAS DIFFER{at}: {len(self.diffs)} of {self.checked} tensors differ between "
            f"{n} {self.unit}s; first: {self.first.kind} '{self.first.name}'."
        ]
        lines += [f"  {i}. {d.summary(self.unit)}" for i, d in enumerate(self.diffs[:limit], 1)]
        if len(self.diffs) > limit:
            lines.append(f"  ... and {len(self.diffs) - limit} more")
        kinds = {d.kind for d in self.diffs}
        lines.append("Likely causes:")
        if "buffer" in kinds:
            lines.append(
                "  - buffers updated from each rank's own data (BatchNorm running statistics): "
                "use torch.nn.SyncBatchNorm.convert_sync_batchnorm(model), or keep DDP's "
                "buffer sync on and compare right after forward"
            )
        if kinds & {"parameter", "variable"}:
            lines.append(
                "  - a parameter changed outside the synchronised update (an in-place edit on "
                "some ranks, an unsynchronised optimizer, gradients not all-reduced), or "
                "replicas initialised from different seeds: seed model init with a shared "
                "seed (fwd9m.distributed.seeder().seed_everything(shared=True))"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "consistent": self.consistent,
            "step": self.step,
            "replicas": self.replicas,
            "checked": self.checked,
            "skipped": self.skipped,
            "diffs": [d.to_dict() for d in self.diffs],
        }

    def raise_if_inconsistent(self) -> ReplicaReport:
        """Raises :class:`~fwd9m.errors.NondeterminismError` (the rendered report) when
        replicas differ; returns self otherwise."""
        if self.diffs:
            raise NondeterminismError(self.render())
        return self


# ----------------------------------------------------------------------------- comparing


def _group(digests: list[int | None]) -> tuple[tuple[int, ...], ...]:
    by: dict[Any, list[int]] = {}
    for i, d in enumerate(digests):
        by.setdefault(d, []).append(i)
    return tuple(tuple(g) for g in sorted(by.values(), key=lambda g: (-len(g), g[0])))


def compare_digests(tables: list[list[tuple[str, str, str, tuple[int, ...], int]]]) -> list[ReplicaDiff]:
    """Diffs between per-replica tables of ``(name, kind, dtype, shape, digest)``,
    in the order of replica 0's table (names other replicas add come after)."""
    order: dict[str, tuple[str, str, tuple[int, ...]]] = {}
    for table in tables:
        for name, kind, dtype, shape, _ in table:
            order.setdefault(name, (kind, dtype, tuple(shape)))
    maps = [{row[0]: row for row in table} for table in tables]
    diffs = []
    for name, (kind, dtype, shape) in order.items():
        digests = [(m[name][2], tuple(m[name][3]), m[name][4]) if name in m else None for m in maps]
        groups = _group(digests)
        if len(groups) > 1:
            diffs.append(
                ReplicaDiff(name, kind, dtype, shape, groups, tuple(None if d is None else d[2] for d in digests))
            )
    return diffs


def _max_abs(arrays: list[Any], groups: tuple[tuple[int, ...], ...]) -> float | None:
    import numpy as np

    try:
        ref = np.asarray(arrays[groups[0][0]], dtype=np.float64)
        worst = 0.0
        for g in groups[1:]:
            other = np.asarray(arrays[g[0]], dtype=np.float64)
            if other.shape != ref.shape:
                return None
            worst = max(worst, float(np.nanmax(np.abs(other - ref))) if ref.size else 0.0)
        return worst
    except (TypeError, ValueError, IndexError):
        return None


# ----------------------------------------------------------------------------- torch


def _torch_tensors(obj: Any, buffers: bool) -> list[tuple[str, str, Any]]:
    """``(name, kind, tensor)`` of a module (DDP/DataParallel unwrapped) in module
    order, or of a mapping of tensors."""
    import torch

    if isinstance(obj, dict):
        return [
            (str(k), "buffer" if not getattr(v, "requires_grad", False) else "parameter", v) for k, v in obj.items()
        ]
    if not isinstance(obj, torch.nn.Module):
        raise TypeError(f"check_replicas: expected a torch.nn.Module or dict of tensors, got {type(obj).__name__}")
    while isinstance(obj, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)):
        obj = obj.module
    out = []
    for prefix, m in obj.named_modules():
        dot = prefix + "." if prefix else ""
        out += [(dot + n, "parameter", p) for n, p in m.named_parameters(recurse=False)]
        if buffers:
            out += [(dot + n, "buffer", b) for n, b in m.named_buffers(recurse=False) if b is not None]
    return out


def _check_torch(obj: Any, step: int | None, buffers: bool, group: Any) -> ReplicaReport:
    import torch

    from ..torch._digest import digest as torch_digest

    rows = _torch_tensors(obj, buffers)
    table = [(n, k, str(t.dtype).replace("torch.", ""), tuple(t.shape), torch_digest(t)) for n, k, t in rows]
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return ReplicaReport(step, ["rank 0"], len(table))
    world = dist.get_world_size(group)
    tables: list[Any] = [None] * world
    dist.all_gather_object(tables, table, group=group)
    diffs = compare_digests(tables)
    if diffs:  # measure the first difference (every rank has the same diffs: same call)
        first = diffs[0]
        tensors = {n: t for n, _, t in rows}
        t = tensors.get(first.name)
        mine = (
            t.detach().cpu().numpy()
            if t is not None and t.numel() <= DETAIL_LIMIT and t.dtype not in (torch.bfloat16,) and not t.is_complex()
            else None
        )
        arrays: list[Any] = [None] * world
        dist.all_gather_object(arrays, mine, group=group)
        if all(a is not None for a in arrays):
            diffs[0] = ReplicaDiff(
                first.name,
                first.kind,
                first.dtype,
                first.shape,
                first.groups,
                first.digests,
                _max_abs(arrays, first.groups),
            )
    return ReplicaReport(step, [f"rank {r}" for r in range(world)], len(table), diffs)


# ----------------------------------------------------------------------------- TensorFlow


def _tf_variables(obj: Any) -> list[Any]:
    if isinstance(obj, (list, tuple)):
        return list(obj)
    variables = list(getattr(obj, "weights", None) or getattr(obj, "variables", None) or [])
    opt = getattr(obj, "optimizer", None)
    if opt is not None and isinstance(getattr(opt, "variables", None), (list, tuple)):
        variables += list(opt.variables)
    return variables


def _check_tf(obj: Any, step: int | None) -> ReplicaReport:
    from ..tensorflow._digest import digest as tf_digest

    tables: list[list[Any]] = []
    skipped: list[str] = []
    devices: list[str] = []
    checked = 0
    seen: set[int] = set()
    for v in _tf_variables(obj):
        inner = getattr(v, "value", v)  # Keras 3 Variable -> its tf.Variable
        if callable(inner):
            inner = v
        if id(inner) in seen:
            continue
        seen.add(id(inner))
        name = getattr(v, "path", None) or getattr(v, "name", "?")
        values = getattr(inner, "values", None)
        if not isinstance(values, tuple) or len(values) < 2:
            continue  # not a distributed variable: nothing to compare
        sync = getattr(inner, "synchronization", None)
        if sync is not None and getattr(sync, "name", "") == "ON_READ":
            skipped.append(name)
            continue
        while len(tables) < len(values):
            tables.append([])
            devices.append(values[len(devices)].device)
        checked += 1
        for i, component in enumerate(values):
            tables[i].append((name, "variable", component.dtype.name, tuple(component.shape), tf_digest(component)))
    if not tables:
        return ReplicaReport(step, ["replica 0"], checked, skipped=skipped, unit="replica")
    diffs = compare_digests(tables)
    if diffs:
        first = diffs[0]
        comps = next(
            (
                getattr(getattr(v, "value", v), "values", None)
                for v in _tf_variables(obj)
                if (getattr(v, "path", None) or getattr(v, "name", "?")) == first.name
            ),
            None,
        )
        if comps:
            diffs[0] = ReplicaDiff(
                first.name,
                first.kind,
                first.dtype,
                first.shape,
                first.groups,
                first.digests,
                _max_abs([c.numpy() for c in comps], first.groups),
            )
    labels = [f"replica {i} ({d.rsplit('/', 1)[-1] if d else '?'})" for i, d in enumerate(devices)]
    return ReplicaReport(step, labels, checked, diffs, skipped, unit="replica")


# ----------------------------------------------------------------------------- public


def check_replicas(
    obj: Any, *, step: int | None = None, buffers: bool = True, group: Any = None, raise_on_mismatch: bool = False
) -> ReplicaReport:
    """Compare every replica's copy of ``obj``'s parameters and buffers, bit for bit.

    Args:
        obj: a ``torch.nn.Module`` (DDP unwrapped) or ``{name: tensor}`` on every rank
            (a collective: call it on every rank at the same point); or a Keras
            model/layer, list of variables, created under
            ``tf.distribute.MirroredStrategy`` (compares the per-device copies in this
            process).
        step: the training step, reported back (None: not reported).
        buffers: torch: compare buffers too (BatchNorm running statistics...).
        group: torch process group (default: the world).
        raise_on_mismatch: raise instead of returning an inconsistent report.

    Returns:
        :class:`ReplicaReport` (identical on every rank). Without an initialised
        process group (torch) or a distributed strategy (TF) there is one replica and
        the report is trivially consistent.

    Raises:
        NondeterminismError: with ``raise_on_mismatch``, when replicas differ.
        TypeError: ``obj`` is neither a torch module/dict nor TF/Keras variables.
    """
    mod = type(obj).__module__ or ""
    torch = sys.modules.get("torch")
    is_torch = torch is not None and (
        isinstance(obj, torch.nn.Module)
        or (isinstance(obj, dict) and all(isinstance(v, torch.Tensor) for v in obj.values()))
    )
    if is_torch:
        report = _check_torch(obj, step, buffers, group)
    elif mod.startswith(("keras", "tensorflow", "tf_keras")) or isinstance(obj, (list, tuple)):
        report = _check_tf(obj, step)
    else:
        raise TypeError(
            f"check_replicas: cannot read replicas of {type(obj).__name__}; pass a "
            f"torch module, a dict of torch tensors, or a Keras model / TF variables"
        )
    if report.diffs:
        logger.warning("%s", report.render())
    return report.raise_if_inconsistent() if raise_on_mismatch else report


class ReplicaMonitor:
    """Checks replicas every ``every`` steps and remembers the first divergence.

    ``monitor.step()`` after each optimizer step (or pass ``optimizer`` to
    :func:`watch_replicas`, which calls it from a step hook). After the first
    inconsistent check, ``first`` holds its report and checking stops.

    Args:
        obj: what :func:`check_replicas` takes.
        every: check after every ``every``-th step (>= 1).
        on_mismatch: ``"raise"`` (NondeterminismError from ``step()``, on every rank
            at once), ``"warn"`` (:class:`~fwd9m.errors.Fwd9mWarning`) or ``"record"``.
    """

    def __init__(
        self, obj: Any, *, every: int = 1, on_mismatch: str = "raise", buffers: bool = True, group: Any = None
    ) -> None:
        if every < 1:
            raise ValueError(f"every={every} must be >= 1")
        if on_mismatch not in ("raise", "warn", "record"):
            raise ValueError(f"on_mismatch={on_mismatch!r}: use 'raise', 'warn' or 'record'")
        self.obj, self.every, self.on_mismatch = obj, every, on_mismatch
        self.buffers, self.group = buffers, group
        self.steps = 0
        self.checks = 0
        self.first: ReplicaReport | None = None
        self.handle: Any = None

    def check(self, step: int | None = None) -> ReplicaReport:
        """Check now (a collective for torch), recording the report if inconsistent."""
        self.checks += 1
        report = check_replicas(
            self.obj, step=self.steps if step is None else step, buffers=self.buffers, group=self.group
        )
        if not report and self.first is None:
            self.first = report
            if self.on_mismatch == "raise":
                raise NondeterminismError(report.render())
            if self.on_mismatch == "warn":
                warnings.warn(report.render(), Fwd9mWarning, stacklevel=3)
        return report

    def step(self) -> ReplicaReport | None:
        """Count one step; check when it is a multiple of ``every`` (until the first
        divergence). Returns the report when it checked."""
        self.steps += 1
        if self.first is not None or self.steps % self.every:
            return None
        return self.check()

    def remove(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None


def watch_replicas(
    model: Any,
    optimizer: Any = None,
    *,
    every: int = 1,
    on_mismatch: str = "raise",
    buffers: bool = True,
    group: Any = None,
) -> ReplicaMonitor:
    """A :class:`ReplicaMonitor` on ``model``; with a torch ``optimizer`` it checks
    after every ``every``-th ``optimizer.step()`` (``Optimizer.register_step_post_hook``,
    https://docs.pytorch.org/docs/stable/generated/torch.optim.Optimizer.register_step_post_hook.html);
    without one call ``monitor.step()`` yourself. ``monitor.remove()`` detaches it."""
    monitor = ReplicaMonitor(model, every=every, on_mismatch=on_mismatch, buffers=buffers, group=group)
    if optimizer is not None:
        from ..torch._steps import eager  # a collective per check: never traced by torch.compile

        monitor.handle = optimizer.register_step_post_hook(eager(lambda opt, args, kwargs: monitor.step()))
    return monitor


def keras_callback(every: int = 1, on_mismatch: str = "raise"):
    """A ``keras.callbacks.Callback`` checking the model's replicas (MirroredStrategy)
    after every ``every``-th training batch; ``callback.monitor.first`` holds the first
    divergence. Imports Keras."""
    import keras

    class ReplicaCheck(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.monitor: ReplicaMonitor | None = None

        def on_train_batch_end(self, batch, logs=None):
            if self.monitor is None:
                self.monitor = ReplicaMonitor(self.model, every=every, on_mismatch=on_mismatch)
            self.monitor.step()

    return ReplicaCheck()


# ----------------------------------------------------------------------------- fwd9m run hook

_watched: weakref.WeakKeyDictionary[Any, ReplicaMonitor] = weakref.WeakKeyDictionary()
_handle: list[Any] = []


def _global_hook(every: int, on_mismatch: str) -> Callable[..., None]:
    def hook(optimizer, args, kwargs) -> None:
        import torch

        dist = torch.distributed
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
            return
        monitor = _watched.get(optimizer)
        if monitor is None:
            from ..torch._model import model_of

            model = model_of(optimizer)
            if model is None:
                return
            monitor = _watched[optimizer] = ReplicaMonitor(model, every=every, on_mismatch=on_mismatch)
        monitor.step()

    return hook


def install_from_env(environ: dict | None = None) -> bool:
    """Called by ``fwd9m run``'s import hook once torch is imported: when
    :data:`ENV_CHECK_REPLICAS` is ``N``, check replicas after every ``N``-th step of
    every optimizer (``torch.optim.optimizer.register_optimizer_step_post_hook``) and
    raise :class:`~fwd9m.errors.NondeterminismError` at the first divergence.
    Returns True when installed."""
    import os

    raw = (os.environ if environ is None else environ).get(ENV_CHECK_REPLICAS, "")
    if not raw or _handle:
        return bool(_handle)
    try:
        every = int(raw)
    except ValueError:
        logger.warning("%s=%r is not an integer; replica checks are off", ENV_CHECK_REPLICAS, raw)
        return False
    if every < 1:
        return False
    from ..torch._steps import subscribe

    _handle.append(subscribe(post=_global_hook(every, "raise")))
    logger.info("replica check after every %d optimizer step(s)", every)
    return True
