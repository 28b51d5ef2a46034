"""The folder ``fwd9m run`` and ``fwd9m check`` put first on PYTHONPATH: it holds only
``sitecustomize.py``, the start-up hook of every interpreter a run starts
(:mod:`fwd9m._runtime.bootstrap`). Not imported as a package.

Above every other layer, as ``__main__`` is: it starts fwd9m in a new interpreter and
hands ``_runtime``'s hook what ``distributed`` adds to it.
"""
