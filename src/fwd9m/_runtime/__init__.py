"""Process plumbing: how fwd9m starts and watches the interpreters that run a user's
script (no public API, no framework import).

- :mod:`.launch`: run a target as ``__main__``, resolve it, read and write the user's
  files safely, split a launcher's output per rank;
- :mod:`.bootstrap` and ``fwd9m/_sitecustomize/``: the start-up hook of ``fwd9m run`` (the
  folder put on ``PYTHONPATH`` holds only ``sitecustomize.py``);
- :mod:`.capture`: the final-state capture of ``fwd9m check``'s runs;
- :mod:`.process`: each run's process group (killed on a timeout or Ctrl-C), the end
  of its stderr;
- :mod:`.workdir`: a run's working folder linking to the user's directory, the watch of
  that directory and :class:`~.workdir.Guard`, which puts back what a run wrote there;
- :mod:`.quiet`: silence native stderr while a framework is imported.
"""
