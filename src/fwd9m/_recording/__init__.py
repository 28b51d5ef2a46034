"""What the framework recorders write with, below the framework packages: the trace file
(:mod:`._store`), the recording state every recorder shares (:mod:`._common`:
``Recording``, user code locations, capture selection, sampled values) and the capture
of one op's whole call for replay (:mod:`._capture`).

``fwd9m.debug`` (above the frameworks) opens the recordings, reads the traces and
compares them; ``fwd9m/torch/_recorder.py`` and the other recorders only write.
"""
