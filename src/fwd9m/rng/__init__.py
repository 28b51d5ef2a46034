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

from .._rng_adapters import (  # noqa: F401  (_adapter_for: used by fwd9m.rng._state)
    JaxKey,
    _adapter_for,
    reseed,
)
from ._format import (
    FORMAT,
    FORMAT_VERSION,
    from_bytes,
    load_rng_state,
    load_state_dict,
    save_rng_state,
    state_dict,
    to_bytes,
)
from ._state import (
    RestoreReport,
    State,
    capture_rng_state,
    register,
    registered,
    restore_rng_state,
    seeded,
    unregister,
)

__all__ = [
    "capture_rng_state",
    "restore_rng_state",
    "save_rng_state",
    "load_rng_state",
    "seeded",
    "register",
    "unregister",
    "registered",
    "RestoreReport",
    "State",
    "state_dict",
    "load_state_dict",
    "to_bytes",
    "from_bytes",
    "reseed",
    "JaxKey",
    "FORMAT",
    "FORMAT_VERSION",
]
