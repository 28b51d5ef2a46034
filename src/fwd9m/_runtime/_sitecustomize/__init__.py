"""Holds only ``sitecustomize.py``: the directory ``fwd9m run`` puts on PYTHONPATH.

Not imported as a package; see :mod:`fwd9m._runtime.bootstrap`.
"""
