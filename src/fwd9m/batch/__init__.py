"""Batch invariance: does a sample get the same bits whatever else is in its batch?

:func:`check_invariance` runs a model on the same samples at several batch sizes and
places in the batch and compares each sample's outputs bit for bit (``fwd9m check
--vary batch``); :func:`debug_invariance` records the ops at two batch sizes and names
the first op whose shared input rows agree and output rows differ, replayed alone to
prove it (``fwd9m debug --vary batch``). :func:`check_script` and :func:`debug_script`
do the same for the first model call of a script. Framework parts live in
``fwd9m/<fw>/_batch.py``.
"""

from ._check import BatchResult, RowDiff, check_invariance
from ._debug import BatchDebugResult, debug_invariance
from ._script import check_script, debug_script

__all__ = [
    "BatchDebugResult",
    "BatchResult",
    "RowDiff",
    "check_invariance",
    "check_script",
    "debug_invariance",
    "debug_script",
]
