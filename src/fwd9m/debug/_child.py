"""Child process of ``fwd9m debug``: record a script run as ``__main__`` into a trace.

``python -m fwd9m.debug._child OUT LEVEL CAPTURE STEPS FRAMEWORKS MODULE TARGET [ARGS...]``
(CAPTURE/FRAMEWORKS: comma-separated or "-"; STEPS: "A,B" or "-"; MODULE: "1" for ``-m``). Exits with the
script's exit status.
"""

from __future__ import annotations

import os
import re
import sys

_IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", re.M)


def detect_frameworks(target: str, module: bool) -> list[str]:
    """Frameworks a script imports (by reading its source), in registry order; Keras is
    reported as "keras" (its backend is known only once the script has imported it),
    tf-keras as "tensorflow", a library as the framework it trains through
    (``transformers`` as "torch", ``flax`` as "jax"); a script that imports none reads
    the modules beside it that it imports."""
    from .. import _frameworks as registry

    path = target
    if module:
        import importlib.util

        spec = importlib.util.find_spec(target)
        path = spec.origin if spec and spec.origin else ""
    elif os.path.isdir(target):
        path = os.path.join(target, "__main__.py")
    found = _imports(path)
    if found is None:
        return []
    if not any(registry.of_module(m) for m in found):  # then the script's own modules' imports
        from .._lint_hints import local_modules

        for local in local_modules(path):
            found |= _imports(str(local)) or set()
    # a library that trains through a framework counts as it: a script importing only
    # transformers, lightning or flax runs torch or JAX (the registry's ``libraries``)
    names = {registry.of_module(m) for m in found} - {None}
    return [n for n in registry.FRAMEWORKS if n in names]


def _imports(path: str) -> set[str] | None:
    """The top-level modules the file at ``path`` imports (by reading it), None when it
    cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    found = set(_IMPORT.findall(text))
    try:  # every import statement, also `import os, torch` and imports inside functions
        import ast

        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    except (SyntaxError, ValueError, RecursionError):
        pass  # the script fails on its own when run; the regex result stands
    return found


class _Deferred:
    """Records the script's ops from the moment it imports a framework: nothing is
    imported before the script does (Keras picks its backend when imported, from
    ``KERAS_BACKEND`` that the script may set first), and Keras is recorded by the
    recorder of its active backend, read after the import."""

    def __init__(self, out: str, names: list[str], options: dict):
        self.out, self.names, self.options = out, names, options
        self.recorders: dict[str, object] = {}
        self.writer = self.rec = self.trace = None

    def imported(self, module: str) -> None:
        from .. import _frameworks as registry

        name = registry.of_module(module)
        b = registry.backend(name)
        try:
            recorded = b.recorded_by()
            if recorded is None:
                raise RuntimeError(f"no recorder for {name} here")
            if recorded not in self.recorders:
                self._start(recorded)
        except Exception as exc:  # noqa: BLE001 - a recorder never breaks the user's import
            sys.stderr.write(f"fwd9m debug: not recording {name}: {type(exc).__name__}: {exc}\n")

    def _expected(self, first: str) -> list[str]:
        """The header's frameworks: ``first`` and the other named frameworks that are
        recorded by their own recorder (Keras' is known once it is imported)."""
        from .. import _backend
        from .. import _frameworks as registry

        out = [first]
        for n in self.names:
            b = registry.backend(n)
            if b.module in sys.modules:
                try:
                    out.append(b.recorded_by())
                except Exception:  # noqa: BLE001
                    continue
            elif type(b).recorded_by is _backend.BackendBase.recorded_by:
                out.append(n)
        return list(dict.fromkeys(n for n in out if n))

    def _start(self, name: str) -> None:
        from .. import _frameworks as registry
        from . import Trace, _open

        if self.writer is None:
            o = self.options
            self.writer, self.rec = _open(
                self.out, self._expected(name), o["level"], o["capture"], True, o["program"], o["steps"]
            )
            self.trace = Trace(self.out)
        recorder = registry.backend(name).recorder(self.rec)
        recorder.start()
        self.recorders[name] = recorder

    def close(self, completed: bool) -> None:
        from . import Trace, _finish, _open

        if self.writer is None:  # the script imported none of them: an empty trace
            o = self.options
            self.writer, self.rec = _open(
                self.out, self.names, o["level"], o["capture"], True, o["program"], o["steps"]
            )
            self.trace = Trace(self.out)
        _finish(list(self.recorders.values()), self.rec, self.writer, completed, self.trace)


def main(argv: list[str]) -> int:
    out, level, capture, steps, frameworks, module, target, *args = argv
    from .. import _frameworks as registry
    from .._import_hook import after_import
    from .._runtime import launch as _launch
    from . import check_options

    module_flag = module == "1"
    names = frameworks.split(",") if frameworks != "-" else detect_frameworks(target, module_flag)
    if not names:
        sys.stderr.write(
            f"fwd9m debug: {target} imports none of {', '.join(registry.FRAMEWORKS)} "
            f"at top level; pass --framework {'|'.join(registry.FRAMEWORKS)}\n"
        )
        return 2
    options = {
        "level": level,
        "capture": None if capture == "-" else capture,
        "program": {"script": target, "argv": args, "module": module_flag},
        "steps": None if steps == "-" else tuple(int(x) for x in steps.split(",")),
    }
    check_options(level, options["capture"])
    session = _Deferred(out, names, options)
    finder = after_import([registry.backend(n).module for n in names], session.imported)
    completed = False
    try:
        code = _launch.run_as_main(target, args, module=module_flag)
        completed = True
    finally:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
        session.close(completed)
    return code


def _exit_now(code: int) -> None:
    """End a run cut after its step window (:class:`~fwd9m._recording._common.WindowDone`;
    its trace is closed) without the interpreter's teardown: the atexit functions run
    and the standard streams (and the ones a script put in their place) are flushed,
    then ``os._exit``. The teardown of a process that imported torch and torch._dynamo
    (what ``torch.optim`` imports) is the collection of thousands of modules' objects:
    measured 1.1 s of CPU after the atexit functions, of 4.1 s for the whole process
    (torch 2.13, Python 3.11), and nothing of such a run is read but its trace."""
    import atexit

    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)  # CPython's atexit module
    if run_exitfuncs is None:
        raise SystemExit(code)
    run_exitfuncs()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):  # the script may replace them
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed or broken stream: nothing to flush
            pass
    os._exit(code)


if __name__ == "__main__":
    argv = sys.argv[1:]  # the script's own while it runs
    status = main(argv)
    from .._recording._common import WindowDone
    from ._replay import replay_here

    replay_here(argv[0])  # the targeted run of fwd9m debug: the op it captured, replayed here

    if WindowDone.raised:
        _exit_now(status)
    raise SystemExit(status)
