"""Seeding: one seed for every RNG in the process, and seeds derived from it.

``seed_everything`` seeds Python's :mod:`random`, NumPy's legacy global RNG and each
framework that is already imported (or named), and exports the seed in the
``FWD9M_SEED`` environment variable so that child processes (DataLoader workers,
``multiprocessing``, distributed ranks) can find it. It never imports a framework the
caller did not import or name.

``derive_seed`` turns ``(seed, *keys)`` into a new seed with BLAKE2b over a typed,
length-prefixed encoding of the keys, so it is stable across Python versions,
platforms and ``PYTHONHASHSEED`` (Python's ``hash()`` is salted per process for
``str``/``bytes``: https://docs.python.org/3/reference/datamodel.html#object.__hash__).
"""

from __future__ import annotations

from ._derive import derive_seed, jax_key
from ._everything import ENV_VAR, MAX_SEED, current_seed, seed_everything
from ._seeder import Seeder

__all__ = ["seed_everything", "derive_seed", "Seeder", "jax_key", "ENV_VAR", "MAX_SEED", "current_seed"]

# The public class keeps the module name (repr, pickling, docs) it had before
# fwd9m.seed became a package.
Seeder.__module__ = __name__
