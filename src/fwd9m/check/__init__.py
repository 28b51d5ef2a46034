"""Is this reproducible? Run it several times and compare, bit for bit.

Two entry points:

- :func:`check` runs a Python function several times in this process, each time from
  the same seeded state, and compares what it returns (:mod:`fwd9m.compare`).
- :func:`check_script` runs a script, module or command several times, each in a fresh
  interpreter, and compares what it prints, the files it writes and the final state of
  its models and variables (captured by :mod:`fwd9m._capture`).

Both return a :class:`CheckResult`: truthy when every run agreed, with a ranked list of
:class:`Finding` s, a text report (:meth:`CheckResult.report`) and a JSON form
(:meth:`CheckResult.to_dict`).

Where a run works: by default each run's working directory is a fresh, empty temporary
directory holding one symbolic link per entry of the directory ``fwd9m check`` was
started from. Relative paths to data therefore resolve as they would for
``python script.py``, while files the script creates land in the run's own directory,
so runs cannot see each other's outputs (a checkpoint written by run 1 cannot be
resumed by run 2) and the user's directory is left alone. Files written *into* an
existing subdirectory (or over an existing file) go through the link to the real
directory, as ``python script.py`` would write them: fwd9m watches up to
:data:`WATCH_LIMIT` entries of that directory, copies what each run changed there
(files up to :data:`COPY_LIMIT` bytes, not source files) and compares the copies of
files that changed during both runs (a file changed during one run only was edited by
someone else), and the report notes it, since a later run could then see an earlier
run's files. ``cwd="empty"`` starts each run
in an empty directory instead.

The package's modules, one job each: ``_result`` (findings and the report),
``_api`` (:func:`check`), ``_script`` (:func:`check_script`), ``_process`` (launching one
run), ``_runs`` (comparing runs), ``_hints`` (catalog hints and next steps).
"""

from __future__ import annotations

import sys
import types
from typing import Any, Callable

from ._api import assert_reproducible, check
from ._hints import _catalog_hints  # noqa: F401  (tests)
from ._process import (COPY_LIMIT, HEARTBEAT_S, IGNORED_PARTS, IGNORED_PREFIXES, KILL_GRACE_S,  # noqa: F401
                       SOURCE_SUFFIXES, TAIL_BYTES, WATCH_LIMIT, _kill_group)  # _kill_group: fwd9m debug
from ._result import SCHEMA, SCHEMA_VERSION, CheckResult, Finding, RunInfo  # noqa: F401
from ._script import Variant, check_script, parse_vary

__all__ = ["check", "assert_reproducible", "check_script", "CheckResult", "Finding", "RunInfo",
           "Variant", "parse_vary"]


class _CallableModule(types.ModuleType):
    """``fwd9m.check`` is both this module and the function :func:`check`: importing
    the submodule binds the name ``check`` on the package to the module, so the module
    itself is made callable and ``fwd9m.check(fn, ...)`` always works."""

    def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> CheckResult:
        return check(fn, *args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
