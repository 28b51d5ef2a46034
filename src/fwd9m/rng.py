"""Capture, restore, save and load the state of every RNG a training run uses.

A state is a plain ``dict`` mapping a *source* name to that source's state, a tree of
JSON values (int of any size, float, str, bool, None, list, dict) and NumPy arrays:

=============================  =========================================================
source                         what it holds
=============================  =========================================================
``python``                     :func:`random.getstate` (MT19937: 625 words + gauss)
``numpy``                      ``numpy.random.get_state(legacy=False)`` (global RNG)
``torch``                      ``torch.get_rng_state()`` (CPU generator, uint8 bytes)
``torch.cuda``                 ``torch.cuda.get_rng_state_all()``, only when CUDA is
                               already initialised (capturing never initialises it)
``tensorflow``                 the global seed and the eager op-seed generator (below)
``tensorflow.global_generator`` ``tf.random.get_global_generator()``'s state, only if
                               it was already created
``keras``                      the global seed and global ``SeedGenerator`` state
``user.<name>``                an object passed to :func:`register`
=============================  =========================================================

Sources are captured only for frameworks already imported (nothing is imported here).

TensorFlow op seeds. With a global seed set and no op seed, each eager random op
draws its op seed from ``context()._rng``, a :class:`random.Random` seeded with the
global seed by ``Context._set_global_seed`` (``_internal_operation_seed`` returns
``self._rng.randint(0, 2**31 - 1)``): ``tensorflow/python/eager/context.py``,
https://github.com/tensorflow/tensorflow/blob/master/tensorflow/python/eager/context.py.
That :class:`random.Random` state is what the ``tensorflow`` source saves. In graph
mode (``tf.function`` tracing) the counter is ``_graph_to_seed_dict`` per graph in
``tensorflow/python/framework/random_seed.py``, which lives only as long as the graph.
Stateful random kernels with an op seed keep a counter inside the cached C++ kernel;
it cannot be read, and restoring resets it (``_set_global_seed`` clears the kernel
cache). For exact resume in TF use stateless ops (``tf.random.stateless_*``) or a
registered ``tf.random.Generator``; Keras 3 layers already do (their
``SeedGenerator`` state is a variable).

File format (:func:`save_rng_state`): a NumPy ``.npz`` (zip) with an entry
``__fwd9m_header__`` holding UTF-8 JSON ``{"format": "fwd9m.rng-state",
"version": 1, "sources": {...}, "versions": {...}}`` in which arrays are replaced by
``{"__array__": "<entry>"}``; arrays are stored as plain ``.npy`` entries and read with
``allow_pickle=False``. No pickle anywhere.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from ._log import logger
from .errors import ConfigurationError, FileFormatError

__all__ = ["capture_rng_state", "restore_rng_state", "save_rng_state", "load_rng_state",
           "seeded", "register", "unregister", "registered", "RestoreReport", "state_dict",
           "load_state_dict", "to_bytes", "from_bytes", "reseed", "FORMAT", "FORMAT_VERSION"]

FORMAT = "fwd9m.rng-state"
FORMAT_VERSION = 1
_HEADER = "__fwd9m_header__"

State = dict  # source name -> tree of JSON values and numpy arrays


# --------------------------------------------------------------------------- adapters
# One adapter per kind of generator: how to read, write and reseed its state.

@dataclass(frozen=True)
class _Adapter:
    kind: str
    get: Callable[[Any], Any]
    set: Callable[[Any, Any], None]
    reseed: Callable[[Any, int], None]


def _np():
    import numpy as np

    return np


def _py_get(r):
    version, words, gauss = r.getstate()
    return {"version": version, "words": _np().asarray(words, dtype=_np().uint64),
            "gauss_next": gauss}


def _py_set(r, s):
    words = tuple(int(w) for w in _np().asarray(s["words"]).tolist())
    r.setstate((int(s["version"]), words, s["gauss_next"]))


def _npgen_get(g):
    return {"bit_generator_state": g.bit_generator.state}


def _npgen_set(g, s):
    g.bit_generator.state = s["bit_generator_state"]


def _npgen_reseed(g, seed):
    g.bit_generator.state = type(g.bit_generator)(seed).state


def _torchgen_get(g):
    return {"device": str(g.device), "state": g.get_state().numpy()}


def _torchgen_set(g, s):
    import torch

    g.set_state(torch.from_numpy(_np().array(s["state"], dtype=_np().uint8)))


def _tfgen_get(g):
    return {"algorithm": int(g.algorithm), "state": g.state.numpy()}


def _tfgen_set(g, s):
    g.reset(_np().asarray(s["state"]))


def _keras_sg_get(sg):
    return {"state": _np().asarray(sg.state.value)}


def _keras_sg_set(sg, s):
    sg.state.assign(_np().asarray(s["state"]).astype(_np().asarray(sg.state.value).dtype))


def _keras_sg_reseed(sg, seed):
    dtype = _np().asarray(sg.state.value).dtype
    sg.state.assign(_np().array([seed % 2**31, 0], dtype=dtype))


def _keras_layer_gens(layer) -> dict:
    """Every keras.random.SeedGenerator under ``layer``, keyed by its state's path."""
    out = {}
    layers = (layer._flatten_layers(include_self=True, recursive=True)
              if hasattr(layer, "_flatten_layers") else [layer])
    for lay in layers:
        for sg in getattr(lay, "_seed_generators", ()):  # Keras 3 private; no public list
            out[sg.state.path] = sg
    return out


def _keras_layer_get(layer):
    return {path: _keras_sg_get(sg) for path, sg in _keras_layer_gens(layer).items()}


def _keras_layer_set(layer, s):
    gens = _keras_layer_gens(layer)
    missing = sorted(set(s) - set(gens))
    if missing:
        raise ConfigurationError(
            f"seed generators {missing} are in the saved state but not in the model; "
            f"it has {sorted(gens)}. Build the same model before restoring.")
    for path, sub in s.items():
        _keras_sg_set(gens[path], sub)


def _keras_layer_reseed(layer, seed):
    from .seed import derive_seed

    for path, sg in _keras_layer_gens(layer).items():
        _keras_sg_reseed(sg, derive_seed(seed, path, bits=31))


def _loader_gens(loader) -> dict:
    """The torch.Generators a DataLoader draws from (loader, sampler, batch sampler)."""
    gens = {}
    for name, owner in (("generator", loader), ("sampler", getattr(loader, "sampler", None)),
                        ("batch_sampler.sampler",
                         getattr(getattr(loader, "batch_sampler", None), "sampler", None))):
        g = getattr(owner, "generator", None)
        if g is not None and all(g is not h for h in gens.values()):
            gens[name] = g
    return gens


def _loader_get(loader):
    return {k: _torchgen_get(g) for k, g in _loader_gens(loader).items()}


def _loader_set(loader, s):
    gens = _loader_gens(loader)
    for k, sub in s.items():
        if k not in gens:
            raise ConfigurationError(f"DataLoader has no {k} generator to restore; pass "
                                     f"generator=fwd9m.data.torch_generator(seed)")
        _torchgen_set(gens[k], sub)


def _loader_reseed(loader, seed):
    from .seed import derive_seed

    for k, g in _loader_gens(loader).items():
        g.manual_seed(derive_seed(seed, k))


def _stateful_get(obj):
    return {"state": obj.state_dict()}


def _stateful_set(obj, s):
    obj.load_state_dict(s["state"])


def _no_reseed(obj, seed):
    raise ConfigurationError(f"{type(obj).__name__} cannot be reseeded in place")


def _adapter_for(obj) -> _Adapter:
    import random

    mods = sys.modules
    if isinstance(obj, random.Random):
        return _Adapter("random.Random", _py_get, _py_set, lambda r, s: r.seed(s))
    if "numpy" in mods and isinstance(obj, mods["numpy"].random.Generator):
        return _Adapter("numpy.random.Generator", _npgen_get, _npgen_set, _npgen_reseed)
    if "numpy" in mods and isinstance(obj, mods["numpy"].random.RandomState):
        return _Adapter("numpy.random.RandomState",
                        lambda r: {"state": r.get_state(legacy=False)},
                        lambda r, s: r.set_state(s["state"]), lambda r, s: r.seed(s % 2**32))
    if "torch" in mods:
        torch = mods["torch"]
        if isinstance(obj, torch.Generator):
            return _Adapter("torch.Generator", _torchgen_get, _torchgen_set,
                            lambda g, s: g.manual_seed(s))
        if isinstance(obj, torch.utils.data.DataLoader):
            return _Adapter("torch.utils.data.DataLoader", _loader_get, _loader_set,
                            _loader_reseed)
    if "tensorflow" in mods and isinstance(obj, mods["tensorflow"].random.Generator):
        return _Adapter("tf.random.Generator", _tfgen_get, _tfgen_set,
                        lambda g, s: g.reset_from_seed(s))
    if "keras" in mods:
        keras = mods["keras"]
        if isinstance(obj, keras.random.SeedGenerator):
            return _Adapter("keras.random.SeedGenerator", _keras_sg_get, _keras_sg_set,
                            _keras_sg_reseed)
        if isinstance(obj, keras.layers.Layer):
            return _Adapter("keras.Layer", _keras_layer_get, _keras_layer_set,
                            _keras_layer_reseed)
    if hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"):
        return _Adapter("state_dict", _stateful_get, _stateful_set,
                        getattr(obj, "set_seed", None) and (lambda o, s: o.set_seed(s))
                        or _no_reseed)
    raise TypeError(
        f"cannot register {type(obj).__name__}: supported are random.Random, "
        f"numpy.random.Generator/RandomState, torch.Generator, torch DataLoader, "
        f"tf.random.Generator, keras.random.SeedGenerator, Keras layers/models, "
        f"fwd9m.rng.JaxKey, and objects with state_dict()/load_state_dict()")


def reseed(obj: Any, seed: int) -> None:
    """Reseed a supported generator in place (see :func:`register` for the kinds)."""
    _adapter_for(obj).reseed(obj, seed)


class JaxKey:
    """A mutable holder for a JAX PRNG key, so it can be registered and restored.

    JAX keys are immutable arrays and JAX has no global RNG
    (https://docs.jax.dev/en/latest/random-numbers.html); hold the key here and draw
    subkeys with :meth:`next`. State: ``jax.random.key_data(key)`` (uint32 array) and
    the key implementation name.
    """

    def __init__(self, seed_or_key: Any) -> None:
        import jax

        if isinstance(seed_or_key, int):
            seed_or_key = jax.random.key(seed_or_key)
        self.key = seed_or_key

    def next(self) -> Any:
        """Split the held key; keep one half, return the other (a fresh subkey)."""
        import jax

        self.key, sub = jax.random.split(self.key)
        return sub

    def state_dict(self) -> dict:
        import jax

        return {"impl": str(jax.random.key_impl(self.key)),
                "data": _np().asarray(jax.random.key_data(self.key))}

    def load_state_dict(self, s: dict) -> None:
        import jax

        self.key = jax.random.wrap_key_data(_np().asarray(s["data"]), impl=s["impl"])

    def set_seed(self, seed: int) -> None:
        import jax

        self.key = jax.random.key(seed % 2**32)


# --------------------------------------------------------------------------- registry

class _Entry:
    __slots__ = ("ref", "adapter")

    def __init__(self, obj, adapter):
        try:
            self.ref = weakref.ref(obj)
        except TypeError:  # numpy Generators do not support weak references
            self.ref = lambda obj=obj: obj
        self.adapter = adapter


_REGISTRY: dict[str, _Entry] = {}


def register(obj: Any, name: str | None = None) -> Any:
    """Include ``obj``'s RNG state in :func:`capture_rng_state` as ``user.<name>``.

    Supported: :class:`random.Random`, ``numpy.random.Generator``/``RandomState``,
    ``torch.Generator``, ``torch.utils.data.DataLoader`` (its own, its sampler's and its
    batch sampler's generators), ``tf.random.Generator``, ``keras.random.SeedGenerator``,
    a Keras layer or model (every ``SeedGenerator`` inside it, keyed by variable path),
    :class:`JaxKey`, and any object with ``state_dict()``/``load_state_dict()``.

    Objects that support weak references are held weakly (a collected one drops out);
    others (NumPy ``Generator``) are held until :func:`unregister`.

    Args:
        obj: the generator.
        name: key in the state (default: the kind and ``id``; pass a stable name if the
            state is restored in another process).

    Returns:
        ``obj``, so ``rng = register(np.random.default_rng(1), "aug")`` works.

    Raises:
        TypeError: unsupported object.
    """
    adapter = _adapter_for(obj)
    if name is None:
        name = f"{adapter.kind}@{id(obj):x}"
        logger.info("register: %s has no name; it will not restore in another process",
                    name)
    _REGISTRY[name] = _Entry(obj, adapter)
    return obj


def unregister(name: str) -> None:
    """Forget a registered generator (no error if unknown)."""
    _REGISTRY.pop(name, None)


def registered() -> dict[str, Any]:
    """Live registered generators by name."""
    out = {}
    for name, e in list(_REGISTRY.items()):
        obj = e.ref()
        if obj is None:
            _REGISTRY.pop(name, None)
        else:
            out[name] = obj
    return out


# --------------------------------------------------------------------------- globals

def _tf_context():
    from tensorflow.python.eager import context  # private module: holds the op-seed RNG

    return context.context()


def _cap_tensorflow():
    ctx = _tf_context()
    rng = getattr(ctx, "_rng", None)
    seed = ctx._seed
    return {"global_seed": None if seed is None else int(seed),
            "op_seed_rng": None if rng is None or seed is None else _py_get(rng)}


def _set_tensorflow(s):
    import tensorflow as tf

    if s["global_seed"] is None:
        return
    tf.random.set_seed(int(s["global_seed"]))
    if s["op_seed_rng"] is not None:
        _py_set(_tf_context()._rng, s["op_seed_rng"])


def _tf_global_generator():
    mod = sys.modules.get("tensorflow.python.ops.stateful_random_ops")
    return getattr(mod, "global_generator", None) if mod else None


def _cap_keras():
    # Private modules: Keras 3 has no public getter for these (keras/src/utils/
    # rng_utils.py and keras/src/random/seed_generator.py in keras-team/keras).
    from keras.src.backend.common import global_state
    from keras.src.random import seed_generator
    from keras.src.utils import rng_utils

    gen = global_state.get_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR)
    return {"global_seed": rng_utils.get_random_seed(),
            "global_seed_generator": None if gen is None else _keras_sg_get(gen)}


def _set_keras(s):
    from keras.src.backend.common import global_state
    from keras.src.random import seed_generator
    from keras.src.utils import rng_utils

    global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, s["global_seed"])
    if s["global_seed_generator"] is None:
        global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)
        return
    gen = global_state.get_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR)
    if gen is None:
        gen = seed_generator.SeedGenerator(seed=0)
        global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, gen)
    _keras_sg_set(gen, s["global_seed_generator"])


def _cap_torch_cuda():
    import torch

    if not torch.cuda.is_initialized():
        return None
    return {"states": [t.numpy() for t in torch.cuda.get_rng_state_all()]}


def _set_torch_cuda(s):
    import torch

    states = [torch.from_numpy(_np().array(a, dtype=_np().uint8)) for a in s["states"]]
    if torch.cuda.device_count() != len(states):
        raise ConfigurationError(
            f"the state has {len(states)} CUDA generators but this process sees "
            f"{torch.cuda.device_count()} devices")
    torch.cuda.set_rng_state_all(states)


def _global_sources() -> dict[str, tuple[Callable[[], Any], Callable[[Any], None]]]:
    """Source name -> (capture, restore) for the globals of imported frameworks."""
    import random

    out: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {
        "python": (lambda: _py_get(random._inst), lambda s: _py_set(random._inst, s)),
    }
    mods = sys.modules
    if "numpy" in mods:
        np = mods["numpy"]
        out["numpy"] = (lambda: np.random.get_state(legacy=False),
                        lambda s: np.random.set_state(s))
    if "torch" in mods:
        torch = mods["torch"]
        out["torch"] = (lambda: torch.get_rng_state().numpy(),
                        lambda s: torch.set_rng_state(
                            torch.from_numpy(_np().array(s, dtype=_np().uint8))))
        out["torch.cuda"] = (_cap_torch_cuda, _set_torch_cuda)
    if "tensorflow" in mods:
        out["tensorflow"] = (_cap_tensorflow, _set_tensorflow)

        def cap_gg():
            g = _tf_global_generator()
            return None if g is None else _tfgen_get(g)

        def set_gg(s):
            import tensorflow as tf

            g = _tf_global_generator()
            if g is None:
                g = tf.random.Generator.from_seed(0)
                tf.random.set_global_generator(g)
            _tfgen_set(g, s)

        out["tensorflow.global_generator"] = (cap_gg, set_gg)
    if "keras" in mods:
        out["keras"] = (_cap_keras, _set_keras)
    return out


# Restore order: frameworks first (Keras may draw from Python's random), Python last.
_RESTORE_ORDER = ("keras", "tensorflow", "tensorflow.global_generator", "torch.cuda",
                  "torch", "numpy", "python")


def capture_rng_state(sources: list[str] | None = None) -> State:
    """Snapshot every RNG in use: globals of imported frameworks and registered objects.

    Args:
        sources: restrict to these source names (see the module docstring), e.g.
            ``["python", "numpy", "torch"]``; ``None`` for all.

    Returns:
        ``dict`` source -> state tree (JSON values and NumPy arrays; copies, so later
        draws do not change it). Sources with nothing to capture (CUDA not initialised,
        TF global generator never created) are left out.
    """
    state: State = {}
    for name, (cap, _) in _global_sources().items():
        if sources is None or name in sources:
            value = cap()
            if value is not None:
                state[name] = value
    for name, obj in registered().items():
        key = "user." + name
        if sources is None or key in sources:
            state[key] = _REGISTRY[name].adapter.get(obj)
    return _copy_tree(state)


@dataclass
class RestoreReport:
    """What :func:`restore_rng_state` did.

    restored: sources set from the state. missing: sources in the state with nothing
    to restore them into here (framework not imported, generator not registered).
    not_in_state: live sources the state does not cover (left as they were).
    """

    restored: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    not_in_state: list[str] = field(default_factory=list)


def restore_rng_state(state: State, *, strict: bool = False) -> RestoreReport:
    """Set every RNG to ``state`` (from :func:`capture_rng_state` or a file).

    Sources in ``state`` that do not exist in this process are skipped and reported
    (logged at WARNING and listed in the returned report), unless ``strict``.
    All states are converted and checked before any RNG is changed, so a state that
    does not fit changes nothing (checked: types, shapes; a framework may still refuse
    a state it cannot read).

    Raises:
        ConfigurationError: ``strict`` and a source is missing, or a state does not fit
            its source (e.g. a model without the saved seed generators).
        TypeError: ``state`` is not a dict.
    """
    if not isinstance(state, dict):
        raise TypeError(f"state must be a dict from capture_rng_state, got {type(state)}")
    live = _global_sources()
    regs = registered()
    report = RestoreReport()
    plan: list[tuple[str, Callable[[], None]]] = []
    for name, sub in state.items():
        if name in live:
            plan.append((name, lambda f=live[name][1], s=sub: f(s)))
        elif name.startswith("user.") and name[5:] in regs:
            obj = regs[name[5:]]
            plan.append((name, lambda a=_REGISTRY[name[5:]].adapter, o=obj, s=sub:
                         a.set(o, s)))
        else:
            report.missing.append(name)
    optional = ("torch.cuda", "tensorflow.global_generator")
    report.not_in_state = sorted(
        [n for n in live if n not in state and n not in optional]
        + ["user." + n for n in regs if "user." + n not in state])
    if report.missing:
        msg = (f"RNG state has sources with nothing to restore into: {report.missing} "
               f"(framework not imported or generator not registered here)")
        if strict:
            raise ConfigurationError(msg + ". Fix: import the framework / register(obj, "
                                           "name) before restoring, or strict=False")
        logger.warning(msg)
    _validate(state)
    # Snapshot what we are about to change, so a failure part-way rolls back.
    before = capture_rng_state([n for n, _ in plan])
    order = {n: i for i, n in enumerate(_RESTORE_ORDER)}
    plan.sort(key=lambda p: order.get(p[0], -1))  # user generators first
    done = []
    try:
        for name, apply in plan:
            apply()
            done.append(name)
    except Exception:
        for name in done:
            if name in before:
                with contextlib.suppress(Exception):
                    _apply_one(name, before[name], live, regs)
        raise
    report.restored = done
    logger.info("restore_rng_state: restored %s", done)
    return report


def _apply_one(name, sub, live, regs):
    if name in live:
        live[name][1](sub)
    else:
        _REGISTRY[name[5:]].adapter.set(regs[name[5:]], sub)


def _validate(state: State) -> None:
    """Cheap structural checks of the well-known sources before changing anything."""
    np = _np()

    def need(cond, src, what):
        if not cond:
            raise ConfigurationError(f"RNG state for {src!r} is malformed: {what}")

    py = state.get("python")
    if py is not None:
        need(isinstance(py, dict) and np.asarray(py.get("words")).shape == (625,),
             "python", "expected 625 MT19937 words")
    t = state.get("torch")
    if t is not None:
        need(np.asarray(t).dtype == np.uint8 and np.asarray(t).ndim == 1, "torch",
             "expected a 1-D uint8 array")
    n = state.get("numpy")
    if n is not None:
        need(isinstance(n, dict) and "bit_generator" in n and "state" in n, "numpy",
             "expected numpy.random.get_state(legacy=False)")


def _copy_tree(x):
    np = sys.modules.get("numpy")
    if isinstance(x, dict):
        return {str(k): _copy_tree(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_copy_tree(v) for v in x]
    if np is not None and isinstance(x, np.ndarray):
        return x.copy()
    if np is not None and isinstance(x, np.generic):
        return x.item()
    return x


@contextlib.contextmanager
def seeded(seed: int, frameworks: str | list[str] | None = None) -> Iterator[int]:
    """Run a block with every RNG seeded by ``seed``; restore the previous state after.

    ``with fwd9m.seeded(3): x = np.random.rand()`` gives the same ``x`` each time and
    leaves the RNGs (and ``FWD9M_SEED``) as they were before the block, even on error.
    Seeds as :func:`fwd9m.seed_everything` does; registered generators are neither
    reseeded nor restored.

    Yields:
        the seed.
    """
    from .seed import ENV_VAR, seed_everything

    globals_only = list(_global_sources())
    before = capture_rng_state(globals_only)
    env = os.environ.get(ENV_VAR)
    try:
        yield seed_everything(seed, frameworks)
    finally:
        if env is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = env
        restore_rng_state(before)


# --------------------------------------------------------------------------- file format

def _framework_versions() -> dict[str, str]:
    from ._frameworks import FRAMEWORKS, installed_version

    out = {"python": sys.version.split()[0]}
    for name in ["numpy", *FRAMEWORKS]:
        if name in sys.modules:
            out[name] = str(getattr(sys.modules[name], "__version__", None)
                            or installed_version(name))
    return out


def _split(tree, arrays: dict, path: str):
    np = _np()
    if isinstance(tree, dict):
        return {k: _split(v, arrays, f"{path}/{k}") for k, v in tree.items()}
    if isinstance(tree, list):
        return [_split(v, arrays, f"{path}/{i}") for i, v in enumerate(tree)]
    if isinstance(tree, np.ndarray):
        key = f"a{len(arrays)}"
        arrays[key] = tree
        return {"__array__": key}
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    raise TypeError(f"cannot save {type(tree).__name__} at {path} in an RNG state")


def _join(tree, arrays):
    if isinstance(tree, dict):
        if set(tree) == {"__array__"}:
            return arrays[tree["__array__"]]
        return {k: _join(v, arrays) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_join(v, arrays) for v in tree]
    return tree


def to_bytes(state: State | None = None) -> bytes:
    """Serialise ``state`` (default: :func:`capture_rng_state`) to the file format."""
    np = _np()
    state = capture_rng_state() if state is None else state
    arrays: dict = {}
    sources = _split(_copy_tree(state), arrays, "")
    header = {"format": FORMAT, "version": FORMAT_VERSION, "sources": sources,
              "versions": _framework_versions()}
    blob = json.dumps(header, sort_keys=True).encode("utf-8")
    buf = io.BytesIO()
    np.savez(buf, **{_HEADER: np.frombuffer(blob, dtype=np.uint8)}, **arrays)
    return buf.getvalue()


def from_bytes(data: bytes, *, origin: str = "<bytes>") -> State:
    """Parse the file format; raises FileFormatError on anything unexpected."""
    import zipfile

    np = _np()
    fix = "Fix: point to a file written by fwd9m.save_rng_state, or re-save the state."
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    if bytes(data[:4]) != b"PK\x03\x04":
        raise FileFormatError(f"{origin} is not an fwd9m RNG-state file (it is not a "
                              f"zip/npz archive; {len(data)} bytes). {fix}")
    try:
        with np.load(io.BytesIO(bytes(data)), allow_pickle=False) as z:
            if _HEADER not in z.files:
                raise FileFormatError(f"{origin} is an npz archive but has no "
                                      f"{_HEADER} entry: not an fwd9m RNG-state file. {fix}")
            header = json.loads(z[_HEADER].tobytes().decode("utf-8"))
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                got = header.get("format") if isinstance(header, dict) else header
                raise FileFormatError(f"{origin}: header format is {got!r}, "
                                      f"expected {FORMAT!r}. {fix}")
            version = header.get("version")
            if version != FORMAT_VERSION:
                raise FileFormatError(
                    f"{origin} was written in RNG-state format version {version!r}; this "
                    f"fwd9m reads version {FORMAT_VERSION}. Fix: use the fwd9m version that "
                    f"wrote it (pip install -U framework-determinism for newer files).")
            arrays = {k: z[k] for k in z.files if k != _HEADER}
    except FileFormatError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError,
            UnicodeDecodeError) as exc:
        raise FileFormatError(f"{origin} is truncated or corrupted ({type(exc).__name__}: "
                              f"{exc}). {fix}") from exc
    try:
        state = _join(header["sources"], arrays)
    except (KeyError, TypeError) as exc:
        raise FileFormatError(f"{origin}: the header refers to a missing array ({exc}). "
                              f"{fix}") from exc
    if not isinstance(state, dict):
        raise FileFormatError(f"{origin}: sources is not a mapping. {fix}")
    try:
        _validate(state)
    except ConfigurationError as exc:
        raise FileFormatError(f"{origin}: {exc}. {fix}") from exc
    return state


def save_rng_state(path: str | os.PathLike, state: State | None = None) -> Path:
    """Write ``state`` (default: capture now) to ``path`` atomically (temp + rename).

    Returns:
        the path written. The file is an ``.npz`` archive (see the module docstring);
        a few KiB plus the registered generators' state.
    """
    path = Path(path)
    data = to_bytes(state)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def load_rng_state(path: str | os.PathLike, *, restore: bool = True,
                   strict: bool = False) -> State:
    """Read an RNG-state file and (by default) restore it.

    The whole file is read and checked before any RNG changes: a truncated, corrupted
    or unknown-version file raises and leaves every RNG as it was.

    Returns:
        the state dict.

    Raises:
        FileFormatError: unreadable, truncated, not an RNG-state file, or unknown
            format version.
        FileNotFoundError: no such file.
    """
    path = Path(path)
    state = from_bytes(path.read_bytes(), origin=str(path))
    if restore:
        restore_rng_state(state, strict=strict)
    return state


def state_dict(sources: list[str] | None = None) -> dict:
    """RNG state for a PyTorch checkpoint: ``{"format": ..., "data": uint8 tensor}``.

    Safe with ``torch.load(..., weights_only=True)`` (a str, an int and a tensor).
    Pair: :func:`load_state_dict`.
    """
    import torch

    blob = to_bytes(capture_rng_state(sources))
    return {"format": FORMAT, "version": FORMAT_VERSION,
            "data": torch.frombuffer(bytearray(blob), dtype=torch.uint8)}


def load_state_dict(sd: dict, *, strict: bool = False) -> RestoreReport:
    """Restore from :func:`state_dict` output. Raises FileFormatError when malformed."""
    if not isinstance(sd, dict) or "data" not in sd:
        raise FileFormatError("not an fwd9m RNG state_dict (no 'data' entry)")
    data = sd["data"]
    raw = data.numpy().tobytes() if hasattr(data, "numpy") else bytes(data)
    return restore_rng_state(from_bytes(raw, origin="state_dict"), strict=strict)
