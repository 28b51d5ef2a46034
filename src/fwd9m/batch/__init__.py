"""Batch invariance: does a sample get the same bits whatever else is in its batch?

:func:`check_invariance` runs a model on the same samples at several batch sizes and
places in the batch and compares each sample's outputs bit for bit (``fwd9m check
--vary batch``); :func:`debug_invariance` records the ops at two batch sizes and names
the first op whose shared input rows agree and output rows differ, replayed alone to
prove it (``fwd9m debug --vary batch``). Framework parts live in ``fwd9m/<fw>/_batch.py``.
"""

from ._check import BatchResult, RowDiff, check_invariance

__all__ = ["BatchResult", "RowDiff", "check_invariance"]
