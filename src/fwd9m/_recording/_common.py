"""What every framework recorder shares: the writer, interning, phase/step state,
user code locations, capture selection, sampled values."""

from __future__ import annotations

import enum
import hashlib
import os
import sys
from typing import Any

from .._log import logger
from ..errors import ConfigurationError
from ._store import ARGS_DTYPE, HAS_SAMPLE, NO_STRING, NOT_RECORDED, SEP, TraceWriter

__all__ = ["LEVELS", "PHASES", "CaptureSpec", "Recording", "user_location", "value_text"]

#: Detail levels, like tfdbg2's tensor_debug_mode: "modules" (one record per PyTorch
#: module / Keras layer call, per gradient and per parameter update, no per-op
#: recording: the cheap first pass of ``fwd9m debug --fast``); op sequence only;
#: + digests of every tensor (and 4 sampled values of each float output); + full
#: tensors of the ops that ``capture`` selects.
LEVELS = ("modules", "sequence", "digests", "full")
PHASES = ("forward", "backward", "optimizer", "data", "other")
SAMPLES = 4

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_skip_cache: dict[str, bool] = {}
_FRAMEWORK_MARKERS = (
    f"{os.sep}torch{os.sep}",
    f"{os.sep}tensorflow{os.sep}",
    f"{os.sep}keras{os.sep}",
    f"{os.sep}tf_keras{os.sep}",
    f"{os.sep}jax{os.sep}",
    f"{os.sep}numpy{os.sep}",
    "<frozen ",
    f"{os.sep}contextlib.py",
    f"{os.sep}runpy.py",
    f"{os.sep}functools.py",
    f"{os.sep}_runtime{os.sep}launch.py",
    f"{os.sep}optree{os.sep}",
    f"{os.sep}absl{os.sep}",
)


def _installed_dirs() -> tuple[str, ...]:
    """The standard library's and installed packages' folders (transformers, Lightning,
    Flax...): a frame there is library code, not the user's line."""
    import sysconfig

    paths = sysconfig.get_paths()
    dirs = {
        os.path.join(os.path.realpath(paths[k]), "")
        for k in ("stdlib", "platstdlib", "purelib", "platlib")
        if paths.get(k)
    }
    dirs |= {
        os.path.join(os.path.realpath(p), "")
        for p in sys.path  # site folders added by .pth files too
        if os.path.basename(os.path.normpath(p)) in ("site-packages", "dist-packages")
    }
    return tuple(sorted(dirs))


_INSTALLED = _installed_dirs()


def _is_library(filename: str) -> bool:
    skip = _skip_cache.get(filename)
    if skip is None:
        skip = (
            filename.startswith(_PKG_DIR)
            or any(m in filename for m in _FRAMEWORK_MARKERS)
            or filename.startswith("<")
            or filename.startswith(_INSTALLED)
            or os.path.realpath(filename).startswith(_INSTALLED)
        )
        _skip_cache[filename] = skip
    return skip


def user_location(depth: int = 2) -> str:
    """``"file.py:LINE"`` of the innermost frame outside the frameworks and fwd9m
    (relative to the working directory when below it); ``""`` if none."""
    f = sys._getframe(depth)
    while f is not None:
        fn = f.f_code.co_filename
        if not _is_library(fn):
            return f"{_short(fn)}:{f.f_lineno}"
        f = f.f_back
    return ""


_short_cache: dict[str, str] = {}
#: the directory ``fwd9m debug`` was started in: a recorded run works in a folder of its
#: own, and file names are shown relative to the user's directory, not to that folder
ENV_USER_CWD = "FWD9M_DEBUG_USER_CWD"


def _short(fn: str) -> str:
    s = _short_cache.get(fn)
    if s is None:
        try:
            rel = os.path.relpath(fn, os.environ.get(ENV_USER_CWD) or None)
            s = fn if rel.startswith("..") else rel
        except ValueError:
            s = fn
        _short_cache[fn] = s
    return s


_REPR_TYPES = frozenset({bool, int, float, complex, str, bytes, type(None)})
_MAX_DEPTH = 6
_MAX_ITEMS = 10_000


def value_text(x: Any, str_types: tuple = (), depth: int = 0) -> str:
    """Canonical text of a non-tensor op argument, equal in two runs exactly when the
    value is: ``repr`` of Python scalars and strings (a float's repr round-trips
    exactly), nested lists/tuples/dicts item by item, ``str`` of enums and of
    ``str_types`` (a framework's dtype/device/shape types), NumPy arrays by dtype,
    shape and digest. Anything else is named by its type only, never by ``repr``
    (which may hold a memory address and differ between identical runs)."""
    t = type(x)
    if t in _REPR_TYPES:
        return repr(x)
    if isinstance(x, (list, tuple)):
        if depth >= _MAX_DEPTH or len(x) > _MAX_ITEMS:
            return f"<{t.__qualname__} of {len(x)}>"
        inner = ",".join(value_text(v, str_types, depth + 1) for v in x)
        return f"[{inner}]" if isinstance(x, list) else f"({inner})"
    if isinstance(x, dict):
        if depth >= _MAX_DEPTH or len(x) > _MAX_ITEMS:
            return f"<dict of {len(x)}>"
        return (
            "{"
            + ",".join(
                f"{value_text(k, str_types, depth + 1)}:{value_text(v, str_types, depth + 1)}" for k, v in x.items()
            )
            + "}"
        )
    if isinstance(x, enum.Enum) or (str_types and isinstance(x, str_types)):
        return str(x)
    if isinstance(x, (int, float, complex)):  # NumPy scalars, int/float subclasses
        return repr(x)
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(x, np.dtype):
            return str(x)
        if isinstance(x, (np.ndarray, np.generic)) and not x.dtype.hasobject:
            data = np.ascontiguousarray(x).tobytes()
            return f"ndarray({x.dtype},{x.shape},{hashlib.blake2b(data, digest_size=8).hexdigest()})"
    return f"<{t.__qualname__}>"


class CaptureSpec:
    """Which ops get full tensors written (``--capture``): comma-separated items, each
    an op name (``index_put_``, ``aten::mm``, ``MatMul``), a sequence index window
    ``SEQ:RADIUS`` (ops SEQ-RADIUS..SEQ+RADIUS) or a range ``A-B``.

    Raises:
        ConfigurationError: an item is malformed.
    """

    def __init__(self, spec: str | list[str] | None):
        self.names: set[str] = set()
        self.windows: list[tuple[int, int]] = []
        items = spec.split(",") if isinstance(spec, str) else list(spec or [])
        for item in (i.strip() for i in items):
            if not item:
                continue
            try:
                if ":" in item and item.split(":", 1)[0].isdigit():
                    c, r = item.split(":", 1)
                    self.windows.append((max(0, int(c) - int(r)), int(c) + int(r)))
                elif "-" in item and item.replace("-", "").isdigit():
                    a, b = item.split("-", 1)
                    self.windows.append((int(a), int(b)))
                else:
                    self.names.add(item.split("::")[-1].split(".")[0])
            except ValueError:
                raise ConfigurationError(
                    f"bad --capture item {item!r}; use an op name (index_put_), SEQ:RADIUS (1200:5) or A-B (1195-1205)"
                ) from None

    def __bool__(self) -> bool:
        return bool(self.names or self.windows)

    def wants(self, seq: int, op_name: str) -> bool:
        for a, b in self.windows:
            if a <= seq <= b:
                return True
        return bool(self.names) and op_name.split("::")[-1].split(".")[0] in self.names


class Recording:
    """State shared by a framework's hooks during one ``record()`` block."""

    def __init__(
        self,
        writer: TraceWriter,
        level: str = "digests",
        capture=None,
        samples: bool = True,
        steps: tuple[int, int] | None = None,
    ):
        if level not in LEVELS:
            raise ConfigurationError(f"unknown detail level {level!r}; use one of {', '.join(LEVELS)}")
        self.writer = writer
        self.level = level
        self.digests = level != "sequence"
        self.capture = CaptureSpec(capture) if not isinstance(capture, CaptureSpec) else capture
        if level == "full" and not self.capture:
            raise ConfigurationError(
                "level 'full' needs capture=... (op names or SEQ:RADIUS "
                "windows): full tensors of every op would not be bounded"
            )
        self.samples = samples and self.digests
        #: record ops only while ``steps[0] <= step <= steps[1]`` (None: always)
        self.steps = steps
        #: the window decided while the run goes on (:class:`StepGate`), or None
        self.gate = StepGate.from_env() if steps is None else None
        self.step = 0
        self.phase_override: str | None = None
        self._ctx: dict[tuple, int] = {}
        self._meta: dict[tuple, int] = {}
        self._names: dict[Any, int] = {}
        #: op name -> how many ops of that name a hook failed on (see :meth:`failed`)
        self.not_recorded: dict[str, int] = {}
        self._args: dict[str, tuple] = {}  # text -> args record (see text_record)
        #: sentences a recorder adds about what it could not see as the program ran it
        #: (the end record's ``notes``; the report prints them)
        self.notes: list[str] = []
        #: random draws the recorder saw but could not record op by op, made by a data
        #: pipeline on several threads (the end record's ``pipeline``): each a dict with
        #: ``op``, ``location``, ``where`` (the pipeline stage) and ``catalog`` (an entry id)
        self.pipeline: list[dict[str, str]] = []

    def end_record(self, completed: bool) -> dict[str, Any]:
        """The trace's end record: whether the run completed, its steps, and what was not
        recorded, noted or seen of the input pipeline."""
        end: dict[str, Any] = {"completed": completed, "steps": self.step}
        if self.not_recorded:
            end["not_recorded"] = dict(sorted(self.not_recorded.items()))
        if self.notes:
            end["notes"] = list(dict.fromkeys(self.notes))
        if self.pipeline:
            end["pipeline"] = self.pipeline[:10]
        return end

    def args_record(self, items, str_types: tuple = ()) -> tuple:
        """The input record of an op's non-tensor arguments ``items`` ((name, value)
        pairs): dtype :data:`ARGS_DTYPE`, digest of their canonical text
        (:func:`value_text`), the text (at most 255 bytes) as its sample."""
        return self.text_record(SEP.join(f"{n}={value_text(v, str_types)}" for n, v in items))

    def text_record(self, text: str) -> tuple:
        """:meth:`args_record` of an already rendered text (``name=value`` items joined
        by the separator). Records are remembered by text (most ops repeat theirs)."""
        hit = self._args.get(text)
        if hit is not None:
            return hit
        meta = self.meta_id(ARGS_DTYPE, ())
        if not self.digests:
            return (meta, 0, None, None, None)
        data = text.encode("utf-8", "replace")
        dig = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")
        if len(self._args) > 50_000:
            self._args.clear()
        out = self._args[text] = (meta, HAS_SAMPLE, dig, data[:255], None)
        return out

    def failed(self, name: str, exc: BaseException) -> tuple[int, int]:
        """Count an op a hook failed on and return (name id, context id) for its
        record: no tensors, node ``not recorded: <reason>``. The program goes on; the
        trace's end record and the report say how many ops of each name were missed."""
        self.not_recorded[name] = self.not_recorded.get(name, 0) + 1
        reason = f"{type(exc).__name__}: {exc}"[:200]
        if self.not_recorded[name] == 1:
            logger.warning(
                "fwd9m.debug: could not record %s (%s); the program goes on, the report counts the ops not recorded",
                name,
                reason,
            )
        return self.name_id(name, name), self.ctx_id("", "other", "", NOT_RECORDED + reason, "")

    def name_id(self, key: Any, text: str) -> int:
        i = self._names.get(key)
        if i is None:
            i = self._names[key] = self.writer.string(text)
        return i

    def ctx_id(self, module: str, phase: str, loc: str, node: str, device: str) -> int:
        key = (module, phase, loc, node, device)
        i = self._ctx.get(key)
        if i is None:
            i = self._ctx[key] = self.writer.string(SEP.join(key))
        return i

    def meta_id(self, dtype: str, shape: tuple) -> int:
        key = (dtype, shape)
        i = self._meta.get(key)
        if i is None:
            i = self._meta[key] = self.writer.string(f"{dtype}[{','.join(map(str, shape))}]")
        return i

    @staticmethod
    def sample(u8, itemsize: int) -> bytes:
        """SAMPLES values at evenly spaced positions (first and last included) of a
        contiguous uint8 NumPy view of a float tensor."""
        n = u8.size // itemsize
        if n <= SAMPLES:
            return u8.tobytes()
        rows = u8.reshape(n, itemsize)
        return rows[[0, n // 3, (2 * n) // 3, n - 1]].tobytes()


#: set by ``fwd9m debug``'s early stop in the runs it records for one step window: the
#: run ends (exit status 0) as soon as its last step is recorded
ENV_STOP_AFTER = "FWD9M_DEBUG_STOP_AFTER_WINDOW"


#: set by ``fwd9m debug``'s early stop in op-level runs it starts beside the digest runs,
#: before the step to record is known: the file the :class:`StepGate` reads
ENV_STEP_GATE = "FWD9M_DEBUG_STEP_GATE"
#: seconds between two looks at the gate file of a run waiting for its step
GATE_POLL_S = 0.005


class StepGate:
    """The step window of an op-level run started before the digest runs found it: its
    file holds ``N`` (optimizer steps below N agree in the digest runs: run them
    unrecorded) or ``N record`` (record step N, the first that differs), written whole
    (``os.replace``) by ``fwd9m debug`` as the digest runs go on. :meth:`steps_at` waits
    until the step the run is at is decided; a run whose parent is gone ends (status 2)."""

    def __init__(self, path: str):
        self.path = path
        self.below = 0  #: the steps below this one agree
        self.window: tuple[int, int] | None = None
        self._parent = os.getppid()

    @classmethod
    def from_env(cls) -> StepGate | None:
        path = os.environ.get(ENV_STEP_GATE)
        return cls(path) if path else None

    def steps_at(self, step: int) -> tuple[int, int]:
        """The recording's ``steps`` for optimizer step ``step``: the window once it is
        known, else ``(N, N)`` with N > ``step`` (outside it); waits while undecided."""
        import time

        while self.window is None and step >= self.below:
            self._read()
            if self.window is None and step >= self.below:
                if os.getppid() != self._parent:  # fwd9m debug is gone: nothing will decide
                    os._exit(2)
                time.sleep(GATE_POLL_S)
        return self.window or (self.below, self.below)

    def _read(self) -> None:
        try:
            with open(self.path, encoding="ascii") as f:
                words = f.read().split()
        except (OSError, ValueError):
            return
        if words and words[0].isdigit():
            self.below = max(self.below, int(words[0]))
            if words[1:] == ["record"]:
                self.window = (self.below, self.below)

    @staticmethod
    def write(path: str, below: int, record: bool = False) -> None:
        """Tell the runs waiting on ``path``: steps below ``below`` agree (``record``:
        step ``below`` is the first that differs)."""
        tmp = f"{path}.tmp"
        with open(tmp, "w", encoding="ascii") as f:
            f.write(f"{below}{' record' if record else ''}\n")
        os.replace(tmp, path)


class WindowDone(SystemExit):
    """Raised by a recorder once the last step of its window is recorded, under
    :data:`ENV_STOP_AFTER`: the run ends there with status 0 (a ``SystemExit``, so a
    script's ``except Exception`` does not swallow it)."""

    #: set once raised in this process: the run ended at its window (:mod:`._child` exits at once)
    raised = False

    def __init__(self) -> None:
        super().__init__(0)
        WindowDone.raised = True


def guarded(what: str):
    """Decorate a recorder hook method so that an exception inside it is counted on
    ``self.rec`` (:meth:`Recording.failed`, as ``what``) instead of reaching the
    program; the hook then returns None."""

    def wrap(method):
        def hook(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - a recorder never breaks the program
                try:
                    self.rec.failed(what, exc)
                except Exception:  # noqa: BLE001
                    pass
                return None

        hook.__name__ = method.__name__
        hook.__doc__ = method.__doc__
        return hook

    return wrap


def sample_flags(dtype_is_float: bool, rec: Recording) -> int:
    return HAS_SAMPLE if (dtype_is_float and rec.samples) else 0


UNUSED = NO_STRING
