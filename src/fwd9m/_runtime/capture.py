"""Child side of ``fwd9m check``: save the final state of a run, without pickle.

When the environment variable :data:`ENV_DIR` names a directory, :func:`install`
(called by the check bootstrap ``python -m fwd9m._runtime.capture``, or by the start-up hook
``fwd9m/_sitecustomize`` when :data:`ENV_SITE` is set, for ``--enable`` and
``-- command`` runs) arranges that, when the script ends, this process writes into that directory:

- ``capture-<pid>.npz``: every array of the final state, keys ``a0``, ``a1``, ...
  (``numpy.savez``, read back with ``allow_pickle=False``);
- ``capture-<pid>.json`` (written last, atomically: a capture without it is ignored):
  the leaf paths, their framework dtypes, non-array leaves, a string-hash probe, the
  process's argv and rank, and the environment fingerprint (``fwd9m.environment``).

What is captured: what each framework's backend gives
(:meth:`fwd9m._backend.Backend.final_state`: models, optimizers and variables, found
with ``gc.get_objects()`` at exit among the live instances of its
:meth:`~fwd9m._backend.Backend.state_types`, top-level models only), then the arrays and
tensors bound to global names of the script. Objects that went out of scope before the
end are there only if a backend's :meth:`~fwd9m._backend.Backend.keep_alive` hooks kept
them from construction (``fwd9m/<framework>/_capture.py`` says which); the script's
``__main__`` globals are kept alive through the ``exec`` audit event.

Nothing here raises into the user's script: a failed capture is recorded in the JSON.
"""

from __future__ import annotations

import atexit
import dataclasses
import gc
import json
import os
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV_DIR = "FWD9M_CHECK_CAPTURE"
#: a fixed string whose ``hash()`` differs between interpreters unless PYTHONHASHSEED is set
HASH_PROBE_TEXT = "fwd9m hash-seed probe"
FORMAT = "fwd9m.capture"
FORMAT_VERSION = 1

_SKIP_GLOBALS = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)
_state: dict[str, Any] = {"installed": False, "written": False, "mains": [], "kept": {}, "started": time.time()}


# --------------------------------------------------------------------------- install


def _audit(event: str, args: tuple) -> None:
    # runpy executes the script in a temporary __main__ module that is dropped when it
    # returns; keep a reference so its globals are still there at the end.
    if event == "exec":
        main = sys.modules.get("__main__")
        if main is not None and all(m is not main for m in _state["mains"]):
            _state["mains"].append(main)
            filename = getattr(args[0], "co_filename", None) if args else None
            if isinstance(filename, str) and filename == getattr(main, "__file__", None):
                from . import frames

                frames.watch(filename)  # the entry function's locals, kept for the capture


def _keep(obj: Any) -> None:
    _state["kept"].setdefault(id(obj), obj)


def _keep_alive(name: str) -> None:
    """Install framework ``name``'s keep-alive hooks; a failure is recorded, not raised."""
    from .. import _frameworks

    try:
        _frameworks.backend(name).keep_alive(_keep)
    except Exception as exc:  # never break the user's import
        _state["error"] = f"{name} hooks: {type(exc).__name__}: {exc}"


class _PostImport:
    """A meta-path finder that installs a framework's keep-alive hooks right after the
    framework finishes importing (``pending``: top-level module -> framework name)."""

    def __init__(self, pending: dict[str, str]) -> None:
        self.pending = pending

    def find_spec(self, name, path=None, target=None):
        framework = self.pending.pop(name, None)
        if framework is None:
            return None
        if not self.pending:  # first, so that finders asked below cannot re-enter
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        original = getattr(loader, "exec_module", None)
        if original is None:
            return None

        def exec_module(module):
            original(module)
            _keep_alive(framework)

        loader.exec_module = exec_module
        return spec


def _install_keep_alive() -> None:
    """Keep-alive hooks of every framework: now if it is imported, else once it is."""
    from .. import _frameworks

    pending = {}
    for f in _frameworks.FRAMEWORKS.values():
        if f.module in sys.modules:
            _keep_alive(f.name)
        else:
            pending[f.module] = f.name
    if pending:
        sys.meta_path.insert(0, _PostImport(pending))


def install(out_dir: str | os.PathLike[str] | None = None, at_exit: bool = True) -> bool:
    """Arrange for this process's final state to be saved in ``out_dir`` (default: the
    directory named by :data:`ENV_DIR`). Returns False when there is nowhere to write.
    Idempotent."""
    out_dir = out_dir or os.environ.get(ENV_DIR)
    if not out_dir:
        return False
    if _state["installed"]:
        return True
    _state.update(installed=True, out_dir=str(out_dir), hash_probe=hash(HASH_PROBE_TEXT), pid=os.getpid())
    try:
        _state["cwd"] = os.getcwd()  # the run's own folder: masked in bytes leaves, as check masks it in strings
    except OSError:
        pass
    sys.addaudithook(_audit)
    from . import lazy_backup

    lazy_backup.install()  # --cwd link: a large file of yours copied before the run first writes it
    _install_keep_alive()
    from . import clock

    clock.install()  # this run's clock, as the script reads it (fwd9m check's ENV_SHIFT)
    if at_exit:
        atexit.register(write)
    return True


# --------------------------------------------------------------------------- collect


def _name_of(obj: Any, names: dict[int, str]) -> str | None:
    return names.get(id(obj))


def _scopes() -> list[tuple[str, dict[str, Any]]]:
    """``(prefix, variables)`` of the script: its ``__main__`` globals (prefix ``""``), then
    the locals of its entry functions (``"main()."``, :mod:`fwd9m._runtime.frames`)."""
    from . import frames

    scopes: list[tuple[str, dict[str, Any]]] = []
    for main in list(_state["mains"]) + [sys.modules.get("__main__")]:
        g = getattr(main, "__dict__", None) or {}
        if g.get("__name__") != "__main__" or g.get("__spec__") and g["__spec__"].name == __name__:
            continue
        scopes.append(("", g))
    return scopes + [(f"{function}().", local) for function, local in frames.kept()]


def _variables(scopes: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str, Any]]:
    """``(prefix, name, value)`` of the script's variables that may hold state."""
    return [
        (prefix, k, v)
        for prefix, scope in scopes
        for k, v in list(scope.items())
        if not k.startswith("__") and not isinstance(v, _SKIP_GLOBALS)
    ]


def _script_arrays(variables: list[tuple[str, str, Any]], backends: list[Any], taken: set[int]) -> dict[str, Any]:
    """The script's variables that are arrays or hold an array no backend saved
    (``taken``: ids of what the models and variables saved hold)."""
    from ..compare import to_numpy

    arrays: dict[str, Any] = {}
    for prefix, k, v in variables:
        try:
            if (to_numpy(v) is not None and id(v) not in taken) or _holds_arrays(v, to_numpy, backends, taken):
                arrays.setdefault(prefix + k, v)
        except Exception:
            pass
    return arrays


def _holds_arrays(value: Any, to_numpy, backends: list[Any], taken: set[int], budget: int = 10_000) -> bool:
    """Whether ``value`` is or holds (in a dict, list, tuple, dataclass, a framework's
    container such as a JAX pytree: a Flax ``TrainState``, an optax state; or a tensor
    made of parts: a quantized one) an array that no model or variable capture saved
    (not in ``taken``). At most ``budget`` nodes are looked at."""
    from ..compare._values import _attributes, _expand

    if isinstance(value, (str, bytes, int, float, bool, type(None))):
        return False
    stack, seen = [value], set()
    while stack and budget > 0:
        v = stack.pop()
        budget -= 1
        if id(v) in seen or id(v) in taken or _saved(v, taken):  # a model its backend saved: not again
            continue
        seen.add(id(v))
        if v is not value and to_numpy(v) is not None:
            if id(v) not in taken:
                return True
            continue
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            stack.extend(getattr(v, f.name, None) for f in dataclasses.fields(v))
        elif (parts := _expand(v)) is not None and to_numpy(v) is None:
            stack.extend(parts[0].values())
        elif v is not value and (leaves := _tree_leaves(v, backends)):
            stack.extend(leaves)
        elif v is not value and (attributes := _attributes(v)):  # an object in a container
            stack.extend(attributes.values())
        else:
            stack.extend(_tree_leaves(v, backends))
    return False


def _saved(v: Any, taken: set[int]) -> bool:
    """Whether ``v`` is a model or layer whose weights a backend saved (all of them in
    ``taken``): a Keras layer's ``weights``, a torch module's ``parameters()``. A layer
    without weights (a lookup layer: its vocabulary is not a variable) is not."""
    held = getattr(v, "weights", None)
    if not isinstance(held, list) and callable(getattr(v, "parameters", None)):
        try:
            held = list(v.parameters())
        except Exception:  # noqa: BLE001 - not a module after all
            held = None
    return isinstance(held, list) and bool(held) and all(id(x) in taken for x in held)


def _tree_leaves(v: Any, backends: list[Any]) -> list[Any]:
    """The first backend's :meth:`~fwd9m._backend.Backend.tree_leaves` of ``v``, [] for
    none (or for a leaf that is its own only leaf)."""
    for b in backends:
        leaves = b.tree_leaves(v)
        if leaves is not None:
            return [] if len(leaves) == 1 and leaves[0] is v else leaves
    return []


def _label(kind: str, obj: Any, names: dict[int, str], used: dict[str, int]) -> str:
    base = _name_of(obj, names) or f"{kind}:{type(obj).__name__}"
    used[base] = used.get(base, 0) + 1
    return base if used[base] == 1 else f"{base}#{used[base]}"


def _backends() -> list[Any]:
    """Every framework's backend (imported or not: each looks at ``sys.modules``), in
    capture order."""
    from .. import _frameworks

    return sorted(_frameworks.backends(list(_frameworks.FRAMEWORKS)), key=lambda b: b.capture_rank)


def collect() -> dict[str, Any]:
    """``{label: object}`` of everything to save, in a stable order: each backend's
    final state in capture order, then the script's array globals not saved with them."""
    backends = _backends()
    variables = _variables(_scopes())
    names: dict[int, str] = {}
    for prefix, k, v in variables:
        if not prefix:  # globals only: whether the watcher saw a function's frame is timing, a name is not
            names.setdefault(id(v), k)
    found = _live_objects(backends)
    used: dict[str, int] = {}
    out: dict[str, Any] = {}
    taken: set[int] = set()

    def name_of(obj: Any) -> str | None:
        return _name_of(obj, names)

    def label(kind: str, obj: Any) -> str:
        return _label(kind, obj, names, used)

    for b in backends:
        part = b.final_state(found[b.name], name_of, label, taken)
        out.update(part)
        taken.update(id(v) for v in part.values())
    arrays = _script_arrays(variables, backends, taken)
    for k in sorted(arrays):
        if id(arrays[k]) not in taken:
            taken.add(id(arrays[k]))
            out[f"{'locals' if '().' in k else 'globals'}.{k}"] = arrays[k]
    return out


def _live_objects(backends: list[Any]) -> dict[str, list]:
    """Backend name -> the live instances of its state types (those the keep-alive hooks
    saw, then, if a framework is loaded, every object the garbage collector tracks),
    each once, in the order found; an object of several backends' types goes to the
    first in capture order."""
    found: dict[str, list] = {b.name: [] for b in backends}
    buckets = [(types, found[b.name]) for b in backends if (types := b.state_types())]
    seen: set[int] = set()
    kinds: dict[type, list | None] = {}  # one issubclass test per type, not per object

    # a type a nominal test settles in its MRO; an ABC (tf.Variable) otherwise asks every
    # class below it, per type met: 0.25 s of CPU over the ~1,200 types of a Keras run
    tests = [(_subclass_test(types), bucket) for types, bucket in buckets]

    def consider(o: Any) -> None:
        t = type(o)
        if t not in kinds:
            kinds[t] = next((bucket for test, bucket in tests if test(t)), None)
        bucket = kinds[t]
        if bucket is not None and id(o) not in seen:
            seen.add(id(o))
            bucket.append(o)

    for o in _state["kept"].values():
        consider(o)
    if buckets:
        for o in gc.get_objects():
            consider(o)
    return found


def _subclass_test(types: tuple[type, ...]) -> Callable[[type], bool]:
    """``issubclass(t, types)`` as a function of ``t``: a look in ``t.__mro__`` when
    that gives the same answer for every type (no class in or below ``types`` has a
    custom subclass check or hook, nor an ABC virtual subclass registered), else
    ``issubclass`` itself."""
    if all(_nominal(c) for root in types for c in _below(root)):
        wanted = set(types)
        return lambda t: not wanted.isdisjoint(t.__mro__)
    return lambda t: issubclass(t, types)


def _below(root: type) -> list[type]:
    """``root`` and every class derived from it."""
    out, todo, seen = [], [root], set()
    while todo:
        c = todo.pop()
        if id(c) not in seen:
            seen.add(id(c))
            out.append(c)
            todo.extend(type.__subclasses__(c))
    return out


def _nominal(cls: type) -> bool:
    """Whether ``issubclass(t, cls)`` is ``cls in t.__mro__`` apart from the classes
    derived from ``cls`` (each tested on its own by :func:`_subclass_test`)."""
    import abc

    meta = type(cls).__subclasscheck__
    if meta is type.__subclasscheck__:
        return True
    if meta is not abc.ABCMeta.__subclasscheck__ or any("__subclasshook__" in vars(k) for k in cls.__mro__[:-1]):
        return False
    try:
        from _abc import _get_dump  # CPython's ABC registry, read only

        return not _get_dump(cls)[0]
    except Exception:  # another implementation: ask issubclass
        return False


# --------------------------------------------------------------------------- write / read


def _jsonable(leaf: Any) -> Any:
    if leaf is None or isinstance(leaf, (bool, int, str)):
        return {"v": leaf}
    if isinstance(leaf, float):
        return {"float": leaf.hex()}
    if isinstance(leaf, bytes):
        import hashlib

        cwd = _state.get("cwd")
        for folder in (cwd, os.path.realpath(cwd)) if cwd else ():
            leaf = leaf.replace(os.fsencode(folder), b"<cwd>")  # hashed here, so masked here
        return {"bytes_sha256": hashlib.sha256(leaf).hexdigest(), "len": len(leaf)}
    from ..compare import _Opaque

    if isinstance(leaf, _Opaque):
        return {"opaque": f"{leaf.type.__module__}.{leaf.type.__qualname__}"}
    return _repr_leaf(leaf)


def _repr_leaf(leaf: Any) -> dict[str, Any]:
    """A leaf compared by its ``repr`` (a set, an object with its own ``==``): a digest of
    the whole text (its first 200 characters kept to show), a set's items in sorted
    order (its iteration order follows the string-hash seed), object addresses masked."""
    import hashlib
    import re

    if isinstance(leaf, (set, frozenset)):
        text = "{" + ", ".join(sorted(repr(x) for x in leaf)) + "}"
    else:
        text = repr(leaf)
    text = re.sub(r" at 0x[0-9a-fA-F]+", " at 0x…", text)
    return {"repr": text[:200], "repr_sha256": hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()}


def write(out_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """Save the final state now (runs once; also called at exit). Never raises."""
    if _state["written"] or _state.get("pid", os.getpid()) != os.getpid():
        return None  # already written, or a forked child (its parent writes the state)
    _state["written"] = True
    raw = out_dir or _state.get("out_dir") or os.environ.get(ENV_DIR, "")
    if not raw or not Path(raw).is_dir():  # nowhere named: never the working directory (Path("") is ".")
        return None
    out_dir = Path(raw)
    pid = os.getpid()
    manifest = _manifest(pid)
    arrays: dict[str, Any] = {}
    from . import frames

    try:
        _add_leaves(manifest, arrays)
    except Exception as exc:
        manifest["error"] = f"capture failed: {type(exc).__name__}: {exc}"
    frames.release()  # the entry function's locals go now, as they would have at its return
    try:
        from .. import environment

        manifest["environment"] = environment.collect()
    except Exception as exc:
        manifest["environment_error"] = f"{type(exc).__name__}: {exc}"
    return _save(out_dir, pid, manifest, arrays)


def _manifest(pid: int) -> dict[str, Any]:
    """The capture manifest of this process, without its leaves and environment yet."""
    from .launch import RANK_VARS

    # the rank under torchrun, mpirun or horovodrun: state is compared rank by rank
    rank = next((os.environ[v] for v in RANK_VARS if os.environ.get(v)), None)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "pid": pid,
        "argv": list(sys.argv),
        "rank": rank,
        "started": _state["started"],
        "hash_probe": _state.get("hash_probe", hash(HASH_PROBE_TEXT)),
        "hash_randomization": bool(sys.flags.hash_randomization),
        "pythonhashseed": os.environ.get("PYTHONHASHSEED"),
        "leaves": [],
        "error": _state.get("error"),
        "environment": None,
    }


def _add_leaves(manifest: dict[str, Any], arrays: dict[str, Any]) -> None:
    """Flatten everything :func:`collect` finds into ``manifest["leaves"]``: arrays go to
    ``arrays`` under a key, other leaves inline; an object that cannot be flattened is
    an error leaf."""
    from ..compare import Tensor, flatten

    for label, obj in collect().items():
        try:
            flat = flatten(obj, label)
        except Exception as exc:
            manifest["leaves"].append({"path": label, "error": f"{type(exc).__name__}: {exc}"})
            continue
        for path, leaf in flat.items():
            if isinstance(leaf, Tensor) and leaf.array.dtype != object:
                key = f"a{len(arrays)}"
                arrays[key] = leaf.array
                manifest["leaves"].append({"path": path, "dtype": leaf.dtype, "key": key})
            else:
                manifest["leaves"].append({"path": path, **_jsonable(leaf)})


def _save(out_dir: Path, pid: int, manifest: dict[str, Any], arrays: dict[str, Any]) -> Path | None:
    """Write ``capture-<pid>.npz`` (if any arrays) then ``capture-<pid>.json``, each
    through a temporary file; None, with a message, if that fails."""
    try:
        if arrays:
            import numpy as np

            tmp = out_dir / f"capture-{pid}.tmp.npz"
            np.savez(tmp, **arrays)
            os.replace(tmp, out_dir / f"capture-{pid}.npz")
        tmp = out_dir / f"capture-{pid}.json.tmp"
        tmp.write_text(json.dumps(manifest, default=str), encoding="utf-8")
        os.replace(tmp, out_dir / f"capture-{pid}.json")
    except Exception as exc:  # disk full, read-only: the parent reports no capture
        print(f"fwd9m check: could not save the final state: {exc}", file=sys.stderr)
        return None
    return out_dir / f"capture-{pid}.json"


def read(out_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every complete capture in ``out_dir``, oldest process first. Each is the JSON
    manifest plus ``"flat"``: ``{path: leaf}`` as :func:`fwd9m.compare.flatten` gives.

    Raises:
        FileFormatError: a capture is damaged or written by a newer fwd9m.
    """
    from ..compare import Tensor
    from ..errors import FileFormatError

    out = []
    for path in sorted(Path(out_dir).glob("capture-*.json")):
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            raise FileFormatError(f"{path}: unreadable capture ({exc})") from None
        if not isinstance(manifest, dict):
            raise FileFormatError(f"{path}: not a capture this fwd9m can read (not a JSON object)")
        version = manifest.get("format_version", 0)
        if manifest.get("format") != FORMAT or not isinstance(version, int) or version > FORMAT_VERSION:
            raise FileFormatError(
                f"{path}: not a capture this fwd9m can read (format {manifest.get('format')!r} v{version!r})"
            )
        _check_manifest(manifest, path)
        npz = path.with_suffix(".npz")
        data = None
        flat: dict[str, Any] = {}
        try:
            if any("key" in leaf for leaf in manifest["leaves"]):
                import numpy as np

                data = np.load(npz, allow_pickle=False)
            for leaf in manifest["leaves"]:
                if "key" in leaf:
                    flat[leaf["path"]] = Tensor(_restore_dtype(data[leaf["key"]], leaf["dtype"]), leaf["dtype"])
                elif "float" in leaf:
                    flat[leaf["path"]] = float.fromhex(leaf["float"])
                elif "v" in leaf:
                    flat[leaf["path"]] = leaf["v"]
                elif "error" not in leaf:
                    flat[leaf["path"]] = {k: v for k, v in leaf.items() if k != "path"}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise FileFormatError(f"{npz}: damaged capture ({exc})") from None
        finally:
            if data is not None:
                data.close()
        manifest["flat"] = flat
        out.append(manifest)
    out.sort(key=lambda m: (m.get("started", 0), m.get("pid", 0)))
    return out


def _check_manifest(m: dict[str, Any], path: Path) -> None:
    """The types the comparison relies on (a script can write into the capture
    directory, so what is there is not necessarily what :func:`write` wrote)."""
    from ..errors import FileFormatError

    leaves = m.get("leaves")
    argv = m.get("argv")
    bad = (
        "leaves"
        if not isinstance(leaves, list)
        or not all(isinstance(leaf, dict) and isinstance(leaf.get("path"), str) for leaf in leaves)
        else "argv"
        if argv is not None and not (isinstance(argv, list) and all(isinstance(a, str) for a in argv))
        else next(
            (
                k
                for k in ("started", "pid")
                if not isinstance(m.get(k, 0), (int, float)) or isinstance(m.get(k, 0), bool)
            ),
            None,
        )
        or next((k for k in ("rank", "error") if m.get(k) is not None and not isinstance(m[k], str)), None)
        or ("environment" if m.get("environment") is not None and not isinstance(m["environment"], dict) else None)
    )
    if bad:
        raise FileFormatError(f"{path}: damaged capture (malformed {bad!r})")


def _restore_dtype(arr: Any, dtype: str) -> Any:
    if arr.dtype.kind == "V" and arr.dtype.fields is None:  # ml_dtypes (bfloat16, ...) saved as raw bytes
        try:
            import ml_dtypes

            return arr.view(getattr(ml_dtypes, dtype))
        except (ImportError, AttributeError, TypeError, ValueError):
            pass
    return arr


# --------------------------------------------------------------------------- entry points

#: Set (to "1") in the environment of a check run of a command: the start-up hook
#: (``fwd9m/_sitecustomize``, first on PYTHONPATH) then installs capture in every
#: Python process the command starts.
ENV_SITE = "FWD9M_CAPTURE_SITE"


def main(argv: list[str] | None = None) -> int:
    """Bootstrap: ``python -m fwd9m._runtime.capture [-m] TARGET [ARGS...]``: run TARGET as
    ``__main__`` (``fwd9m._runtime.launch.run_as_main``), then save the final state."""
    from ..errors import RunError
    from .launch import run_as_main

    argv = list(sys.argv[1:] if argv is None else argv)
    module = bool(argv) and argv[0] == "-m"
    if module:
        argv = argv[1:]
    if not argv:
        print("usage: python -m fwd9m._runtime.capture [-m] TARGET [ARGS...]", file=sys.stderr)
        return 2
    # python -m put the working directory first on sys.path: right for a module (as
    # `python -m module` would have it), wrong for a script (`python script.py` would not)
    if not module and sys.path and os.path.abspath(sys.path[0] or ".") == os.getcwd():
        del sys.path[0]
    install(at_exit=False)
    if os.environ.get("FWD9M_STEPS_CHECK"):  # fwd9m check's early stop: step digests
        from ..steps._session import start

        start()
        from .._recording import _ring

        _ring.start()  # fwd9m debug's digest runs: the op-level ring (FWD9M_DEBUG_RING)
    try:
        code = run_as_main(argv[0], argv[1:], module=module)
    except RunError as exc:
        print(f"fwd9m check: {exc}", file=sys.stderr)
        return 2
    _end_of_program()
    try:
        sys.stdout.flush()
    except Exception:
        pass
    write()
    return code


def _end_of_program() -> None:
    """What the interpreter does when ``__main__`` returns, before the state is captured:
    wait for the non-daemon threads (a training in a thread that outlives the script),
    then run the atexit handlers (a save at exit); each once, as the interpreter would."""
    import threading

    # the interpreter's own step (CPython's threading._shutdown): the hooks registered
    # with threading._register_atexit first (concurrent.futures stops its workers there:
    # an async checkpointer's pool), then every non-daemon thread joined
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None and threading.current_thread() is threading.main_thread():
        try:
            shutdown()
        except Exception:  # noqa: BLE001 - as at exit: the state is captured all the same
            pass
    try:
        atexit._run_exitfuncs()  # the handlers run and are cleared (CPython's atexit module)
    except Exception:  # noqa: BLE001 - the interpreter prints them and goes on, as here
        pass


if __name__ == "__main__":  # keep the state in the importable module, not in __main__
    from fwd9m._runtime.capture import main as _main

    raise SystemExit(_main())
