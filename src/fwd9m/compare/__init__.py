"""Bitwise comparison of nested values: what differs, where, and by how much.

``compare(a, b)`` walks two values of the same structure (dicts, lists, tuples,
named tuples, dataclasses, and plain objects' attributes) down to their leaves and
returns one :class:`LeafDiff` per leaf that is not bit-for-bit identical. Leaves are:

- NumPy arrays and scalars; Python ``float`` (compared by its IEEE-754 bits),
  ``int``, ``bool``, ``str``, ``bytes``, ``None`` (compared with ``==``);
- PyTorch tensors, modules (their ``state_dict()``), optimizers and anything else
  from torch with a ``state_dict()`` (LR schedulers, ``GradScaler``);
- TensorFlow tensors and variables, ``tf.Module`` (its variables by name);
- Keras models and layers (Keras 3 and tf-keras): every weight by its path, plus the
  optimizer's variables when the model has a built optimizer;
- JAX arrays (typed PRNG keys by their key data);
- anything else with ``__array__``.

Equality is bitwise: two floats are equal when their bit patterns are, so NaNs with the
same bits are equal and ``-0.0 != 0.0``. Framework values are converted to NumPy only
when reached, and a framework is imported only when a value's type comes from a module
that is already imported (``sys.modules``), so comparing plain data imports nothing.

A value converted for comparison keeps its framework dtype name (``bfloat16`` from torch
is compared through a bit-exact NumPy view).

Modules: ``_values`` (walking nested values to leaves), ``_bits`` (bitwise comparison
and :class:`LeafDiff`), ``_text`` (printed output line by line), ``_files`` (reading
saved tensors and checkpoints), ``_escape`` (a user's text made safe to print).
"""

# names the rest of fwd9m imports from here, constants and private helpers included
from ._bits import CHUNK, LeafDiff, compare, compare_arrays, compare_flat, ignored  # noqa: F401
from ._escape import clip as _clip  # noqa: F401
from ._escape import escape_control, printable
from ._files import (  # noqa: F401
    STRUCTURED_SUFFIXES,
    TEXT_LIMIT,
    TEXT_SUFFIXES,
    file_digest,
    is_structured,
    is_text,
    mask_timing_tags,
    orbax_roots,
    pair_names,
    read_structured,
)
from ._text import VOLATILE, compare_text, normalize_line  # noqa: F401
from ._values import MAX_DEPTH, Flat, NamedPath, Tensor, _Opaque, flatten, replace_in_leaves, to_numpy  # noqa: F401

__all__ = [
    "Flat",
    "LeafDiff",
    "NamedPath",
    "Tensor",
    "compare",
    "compare_arrays",
    "compare_flat",
    "compare_text",
    "escape_control",
    "file_digest",
    "printable",
    "flatten",
    "ignored",
    "normalize_line",
    "read_structured",
    "replace_in_leaves",
    "to_numpy",
]
