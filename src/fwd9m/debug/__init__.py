"""Find the first op where two runs diverge, and say why.

>>> import fwd9m.debug as dbg                                    # doctest: +SKIP
>>> with dbg.record("run.trace"):                                # doctest: +SKIP
...     train_one_epoch()
>>> report = dbg.diff("a.trace", "b.trace")                      # doctest: +SKIP
>>> print(report.render())                                       # doctest: +SKIP

``record`` streams every op the block executes (PyTorch aten ops in forward, backward
and the optimizer; TensorFlow ops eagerly and inside ``tf.function`` graphs; JAX
primitives executed eagerly and each top-level ``jax.jit`` call as one op) with its
module/layer, phase, user file:line, shapes, dtypes and an exact digest
(:mod:`fwd9m.fingerprint`) of every input and output into a trace file
(:mod:`fwd9m._recording._store`). ``diff`` aligns two traces and classifies the first
divergence: a culprit op, an external source, a structural change, or an environment
difference. ``localize`` does both for an in-process function. ``debug_script`` does
what ``fwd9m debug SCRIPT`` does: two runs in fresh interpreters, compared and explained
(:mod:`fwd9m.debug._script`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from .._recording._common import LEVELS, CaptureSpec, Recording
from .._recording._store import FORMAT_VERSION, TraceReader, TraceWriter
from ..errors import ConfigurationError
from ..steps import diff_steps, is_step_digest_file, step_digest  # step digests (fwd9m.steps)
from ._compare import DebugReport, Report, compare
from ._script import DebugOptions, debug_script, record_script

__all__ = [
    "record",
    "diff",
    "localize",
    "replay",
    "debug_script",
    "record_script",
    "DebugOptions",
    "DebugReport",
    "Report",
    "Trace",
    "LEVELS",
    "FORMAT_VERSION",
    "TraceReader",
    "step_digest",
    "diff_steps",
    "is_step_digest_file",
]


def replay(trace, op: int, **kwargs):
    """Replay op ``op`` of a trace alone from its capture; see
    :func:`fwd9m.debug._replay.replay` (and ``confirm`` for a debug verdict)."""
    from ._replay import replay as _replay

    return _replay(trace, op, **kwargs)


class Trace:
    """Handle yielded by :func:`record`: ``path``, and after the block ``ops``,
    ``tensors`` and ``bytes`` (file size)."""

    def __init__(self, path: str):
        self.path = path
        self.ops = 0
        self.tensors = 0
        self.bytes = 0

    def __repr__(self) -> str:
        return f"Trace({self.path!r}, ops={self.ops}, tensors={self.tensors}, bytes={self.bytes})"


def _frameworks(framework) -> list[str]:
    """Names of the backends whose recorders see the ops of ``framework`` (a name or
    list; default: the frameworks already imported). Keras resolves to its active
    backend (:meth:`fwd9m._backend.Backend.recorded_by`); jax only when no other
    recorded framework is imported (Keras 3 imports jax whatever its backend)."""
    from .. import _frameworks as registry

    if framework is None:
        found = [n for n in _recorded_by(registry.backends()) if n]
        others = [n for n in found if n != "jax" or _is_keras_backend(n)]
        found = others or found
        if not found:
            raise ConfigurationError(
                "record() found no framework imported; import torch, tensorflow or jax first, "
                f"or pass framework= one of {', '.join(registry.FRAMEWORKS)}"
            )
        return list(dict.fromkeys(found))
    names = [framework] if isinstance(framework, str) else list(framework)
    for n in names:
        if n not in registry.FRAMEWORKS:
            raise ConfigurationError(f"debug.record supports {', '.join(registry.FRAMEWORKS)}, not {n!r}")
    out = []
    for b, n in zip(registry.backends(names), _recorded_by(registry.backends(names))):
        if n is None:
            raise ConfigurationError(f"debug.record cannot record {b.name} here: {_why_not_recorded(b)}")
        out.append(n)
    return list(dict.fromkeys(out))


def _recorded_by(backends) -> list[str | None]:
    return [b.recorded_by() for b in backends]


def _is_keras_backend(name: str) -> bool:
    """Whether ``name`` is the active backend of an imported Keras 3."""
    from .. import _frameworks as registry

    return any(b.name != name and b.recorded_by() == name for b in registry.backends())


def _why_not_recorded(b) -> str:
    try:
        b.recorder(None)
    except ConfigurationError as exc:
        return str(exc)
    except Exception:  # noqa: BLE001 - only the message is wanted
        pass
    return "no recorder for it"


_ENV_CACHE: dict[tuple, dict] = {}


def _header(frameworks: list[str], level: str, program: dict | None) -> dict[str, Any]:
    from .. import environment

    key = (tuple(frameworks), os.environ.get("PYTHONHASHSEED"))
    env = _ENV_CACHE.get(key)
    if env is None:  # collected once per process (package metadata reads cost ~20-50 ms)
        # the frameworks recorded are imported by now; a framework not yet imported is
        # not imported here (it would run before the user's script: Keras picks its
        # backend when imported)
        env = _ENV_CACHE[key] = environment.collect()
    return {
        "frameworks": frameworks,
        "level": level,
        "created": time.time(),
        "program": program or {"argv": list(sys.argv)},
        "environment": env,
    }


@contextlib.contextmanager
def record(
    path: str | os.PathLike[str] | None = None,
    *,
    framework: str | list[str] | None = None,
    level: str = "digests",
    capture: str | list[str] | None = None,
    samples: bool = True,
    program: dict | None = None,
    steps: tuple[int, int] | None = None,
) -> Iterator[Trace]:
    """Record every op executed in the block into a trace file.

    Args:
        path: trace file to write (default: a new temporary file; see ``Trace.path``).
        framework: "torch", "tensorflow", "jax" (see :mod:`fwd9m.jax._recorder`: a
            jitted call is one op), "keras" (recorded by its active backend's recorder,
            ``keras.config.backend()``) or a list; default: those already imported (jax
            only when it is Keras' backend or no other recorded framework is imported:
            Keras 3 imports jax whatever its backend).
        level: "sequence" (ops, shapes, dtypes), "digests" (default: + a 64-bit digest
            of every input and output and 4 sampled values of each float output), or
            "full" (+ full tensors of the ops ``capture`` selects).
        capture: op names and/or ``SEQ:RADIUS`` windows whose full input and output
            tensors are stored (any level but "sequence").
        samples: store 4 sampled values per float output (for magnitudes in reports).
        steps: PyTorch: record ops only in optimizer steps ``steps[0]..steps[1]``
            (inclusive; step 0 is before the first ``optimizer.step()``); outside the
            window no dispatch mode is installed, so those steps run at full speed.
            Level "modules" (PyTorch) records one entry per module call, gradient and
            parameter update instead of every op: the cheap first pass of
            ``fwd9m debug --fast``.
    Yields:
        :class:`Trace`; the file is complete when the block exits (also on error).
    Raises:
        ConfigurationError: unknown level/framework, or level "full" without capture.
        UnsupportedVersionError: JAX only: the installed jax lacks a private function the
            recorder hooks (:mod:`fwd9m.jax._private`).
    """
    if framework is not None:
        _import_named([framework] if isinstance(framework, str) else list(framework))
    names = _frameworks(framework)
    check_options(level, capture)
    made = path is None
    if path is None:
        fd, path = tempfile.mkstemp(suffix=".trace", prefix="fwd9m-")
        os.close(fd)
    path = os.fspath(path)
    try:
        writer, rec = _open(path, names, level, capture, samples, program, steps)
    except BaseException:
        if made:  # nothing recorded: leave no empty temporary file behind
            os.unlink(path)
        raise
    from .. import _frameworks as registry

    recorders = [registry.backend(n).recorder(rec) for n in names]
    trace = Trace(path)
    status: dict[str, Any] = {"completed": False}
    try:
        for r in recorders:
            r.start()
        yield trace
        status["completed"] = True
    finally:
        _finish(recorders, rec, writer, status["completed"], trace)


def _import_named(names: list[str]) -> None:
    """Import the frameworks the caller named (a clear error for one not installed)."""
    from .. import _frameworks as registry

    for n in names:
        if n not in registry.FRAMEWORKS:
            raise ConfigurationError(f"debug.record supports {', '.join(registry.FRAMEWORKS)}, not {n!r}")
        try:
            __import__(registry.backend(n).module)
        except ImportError:
            raise ConfigurationError(
                f"debug.record(framework={n!r}): {n} is not installed here; "
                f"pip install it, or record the framework you use"
            ) from None


def check_options(level: str, capture) -> None:
    """Raise ConfigurationError for an unknown level or a bad capture spec."""
    if level not in LEVELS:
        raise ConfigurationError(f"unknown detail level {level!r}; use one of {', '.join(LEVELS)}")
    CaptureSpec(capture)


def _open(
    path: str, names: list[str], level: str, capture, samples: bool, program: dict | None, steps: tuple[int, int] | None
) -> tuple[TraceWriter, Recording]:
    """Create the trace file (header: ``names``, the environment) and its recording."""
    writer = TraceWriter(path, _header(names, level, program))
    return writer, Recording(writer, level=level, capture=CaptureSpec(capture), samples=samples, steps=steps)


def _finish(recorders, rec: Recording, writer: TraceWriter, completed: bool, trace: Trace) -> None:
    """Stop the recorders (last started first) and close the trace with its end record."""
    for r in reversed(recorders):
        try:
            r.stop()
        except Exception:  # noqa: BLE001 - never mask the user's exception
            pass
    writer.close(rec.end_record(completed))
    trace.ops, trace.tensors, trace.bytes = writer.ops, writer.tensors, writer.bytes_written


def diff(a: str | os.PathLike[str], b: str | os.PathLike[str], **kwargs) -> DebugReport:
    """Compare two traces; see :func:`fwd9m.debug._compare.compare`.

    Raises:
        FileFormatError: a file is not a trace, is from an unknown format version, or
            has a damaged header.
    """
    return compare(os.fspath(a), os.fspath(b), **kwargs)


def localize(
    fn: Callable[..., Any],
    *args,
    runs: int = 2,
    framework=None,
    level: str = "digests",
    capture=None,
    directory: str | None = None,
    **kwargs,
) -> DebugReport:
    """Call ``fn(*args, **kwargs)`` ``runs`` times in this process, recording each call,
    and compare the first recording with each later one; returns the first report
    that finds a divergence (or the last, reproducible one).

    In-process runs share the interpreter, so state that carries over between calls
    (RNG streams that ``fn`` does not reseed, caches) shows up as a divergence too,
    which is usually what you want to know.
    """
    if runs < 2:
        raise ConfigurationError("localize needs runs >= 2")
    directory = directory or tempfile.mkdtemp(prefix="fwd9m-localize-")
    paths = []
    for i in range(runs):
        p = os.path.join(directory, f"run{i}.trace")
        with record(p, framework=framework, level=level, capture=capture):
            fn(*args, **kwargs)
        paths.append(p)
    report = None
    for p in paths[1:]:
        report = compare(paths[0], p)
        if not report.reproducible:
            break
    assert report is not None  # runs >= 2
    return report
