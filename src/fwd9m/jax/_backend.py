"""The JAX backend (:class:`fwd9m._backend.Backend`). jax is imported only inside the
methods."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import Any

from .._backend import BackendBase, Source

__all__ = ["JaxBackend"]


class JaxBackend(BackendBase):
    type_roots = ("jax", "jaxlib")
    optional_sources: tuple[str, ...] = ()
    global_rng = False  # https://docs.jax.dev/en/latest/random-numbers.html
    rng_kinds = ("fwd9m.rng.JaxKey",)  # JAX has no generator object; JaxKey is a state_dict one

    def seed(self, seed: int) -> None:
        # JAX has no global RNG state: randomness comes from explicit keys
        # (https://docs.jax.dev/en/latest/random-numbers.html). Nothing to seed;
        # use fwd9m.seed.jax_key(seed) for a key.
        return None

    def rng_sources(self) -> dict[str, Source]:
        return {}  # no global generator (keys are values: fwd9m.rng.JaxKey)

    def to_numpy(self, value: Any):
        import jax
        import numpy as np

        from ..compare._values import Tensor

        if not isinstance(value, jax.Array):
            return None
        name = str(value.dtype)
        if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            value = jax.random.key_data(value)
        return Tensor(np.asarray(value), name)

    def runtime_info(self) -> dict[str, Any]:
        import jax

        return {
            "version": jax.__version__,
            "backend": jax.default_backend(),
            "devices": [str(d) for d in jax.devices()],
        }

    def intra_op_threads(self, environ: Mapping[str, str], cores: int) -> int:
        """XLA's CPU client runs its ops on one thread per usable core, unless ``XLA_FLAGS``
        holds ``--xla_cpu_multi_thread_eigen=false`` (one thread) or
        ``intra_op_parallelism_threads=N`` (the flags :mod:`fwd9m.probe._jax` sets)."""
        flags = environ.get("XLA_FLAGS", "")
        if re.search(r"--xla_cpu_multi_thread_eigen=(false|0)\b", flags):
            return 1
        m = re.search(r"intra_op_parallelism_threads=([1-9][0-9]*)", flags)
        return int(m.group(1)) if m else cores

    def recorder(self, rec: Any) -> Any:
        from ._recorder import JaxRecorder

        return JaxRecorder(rec)

    def tree_leaves(self, value: Any) -> list[Any] | None:
        """A registered pytree's leaves (FrozenDict, a flax struct, an optax state)."""
        jax = sys.modules.get("jax")
        if jax is None or type(value).__module__.split(".")[0] not in ("flax", "optax", "jax"):
            return None
        try:
            return jax.tree_util.tree_leaves(value)
        except Exception:
            return None
