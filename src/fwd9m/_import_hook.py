"""Run a callback just after a top-level module has been imported: a ``sys.meta_path``
finder whose loader runs the real one, then the callback. ``fwd9m run``'s start-up hook
enables each framework this way (:mod:`fwd9m._runtime.bootstrap`), and step digests,
``fwd9m debug``, ``batch`` and ``cost`` start their recorders after the user's script
imported the framework. Imports nothing of fwd9m.
"""

from __future__ import annotations

import importlib.util
import sys

__all__ = ["ImportHook", "after_import"]


# The finder and loader below follow the importlib.abc protocols without subclassing
# them: importing importlib.abc costs start-up time in every hooked interpreter.
class _ChainedLoader:
    """Runs the real loader, then the callback; the module keeps the real loader."""

    def __init__(self, loader, name: str, callback):
        self._loader, self._name, self._callback = loader, name, callback

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._callback(self._name)

    def __getattr__(self, attr):
        return getattr(self._loader, attr)


class ImportHook:
    def __init__(self, names, callback):
        self.pending = set(names)
        self._busy: set[str] = set()
        self._callback = callback

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.pending or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _ChainedLoader(spec.loader, fullname, self._done)
        return spec

    def _done(self, name: str) -> None:
        if name in self.pending:
            self.pending.discard(name)
            self._callback(name)


def after_import(names, callback) -> ImportHook:
    """Call ``callback(name)`` once for each top-level module in ``names`` just after it
    has been imported (now, for those already imported); returns the finder (remove it
    from :data:`sys.meta_path` to stop). ``fwd9m debug`` starts its recorders this way,
    after the user's script imported the framework, never before."""
    pending = [n for n in names if n not in sys.modules]
    finder = ImportHook(pending, callback)
    sys.meta_path.insert(0, finder)
    for name in names:
        if name in sys.modules:
            callback(name)
    return finder
