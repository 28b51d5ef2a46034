"""Is this reproducible? Run it several times and compare, bit for bit.

Two entry points:

- :func:`check` runs a Python function several times in this process, each time from
  the same seeded state, and compares what it returns (:mod:`fwd9m.compare`).
- :func:`check_script` runs a script, module or command several times, each in a fresh
  interpreter, and compares what it prints, the files it writes and the final state of
  its models and variables (captured by :mod:`fwd9m._runtime.capture`).

Both return a :class:`CheckResult`: truthy when every run agreed, with a ranked list of
:class:`Difference` s, a text report (:meth:`CheckResult.report`) and a JSON form
(:meth:`CheckResult.to_dict`).

Where a run works: by default each run's working directory is a fresh, empty temporary
directory holding one symbolic link per entry of the directory ``fwd9m check`` was
started from. Relative paths to data therefore resolve as they would for
``python script.py``, while files the script creates land in the run's own directory,
so runs cannot see each other's outputs (a checkpoint written by run 1 cannot be
resumed by run 2) and the user's directory is left alone. Files written *into* an
existing subdirectory (or over an existing file) go through the link to the real
directory, as ``python script.py`` would write them: fwd9m watches every entry of that
directory (hidden folders such as ``.results/`` included; :data:`TOOL_DIRS` such as
``.git``, ``.venv`` and ``__pycache__``, and any folder holding a ``pyvenv.cfg``,
excluded) up to :data:`WATCH_LIMIT` entries, past which the report warns that writes may
have gone unseen, copies what each run changed there
(files up to :data:`COPY_LIMIT` bytes, not source files) and compares the copies of
files that changed during both runs (a file changed during one run only was edited by
someone else), and the report notes it, since a later run could then see an earlier
run's files. ``cwd="empty"`` starts each run
in an empty directory instead. When nothing at all was compared (no output, file or
final state), there is no verdict: :class:`~fwd9m.errors.RunError`.

Launchers: each worker that torchrun starts (``torchrun``, ``python -m
torch.distributed.run``, ``accelerate launch --multi_gpu``, which runs torchrun in its
own process) writes its stdout and stderr to a file of its own
(:func:`fwd9m._runtime.launch.split_rank_output`), or, under the user's ``--redirects``/``--tee``,
to torchrun's per-rank log file, which is read instead; rank r's output is compared with
rank r's. A shared stdout (the launcher's own, or that of a launcher fwd9m does not know,
such as ``mpirun`` and ``horovodrun``, which are not handled) is compared as it is, and
when several ranks ran and it differs only in how their lines interleave, it is no
difference: lines with a rank prefix (``[1,0]<stdout>:``, ``[default0]:``, ``rank 0:``)
are compared rank by rank in order, lines without one as a multiset, and a note says so.

The package's modules, one job each: ``_result`` (findings and the report),
``_api`` (:func:`check`), ``_script`` (:func:`check_script`), ``_process`` (launching one
run), ``_runs`` (comparing runs), ``_hints`` (catalog hints and next steps).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

from ._api import assert_reproducible, check
from ._hints import _catalog_hints  # noqa: F401  (tests)
from ._process import (  # noqa: F401
    COPY_LIMIT,
    HEARTBEAT_S,
    IGNORED_PARTS,
    IGNORED_PREFIXES,
    KILL_GRACE_S,
    SOURCE_SUFFIXES,
    TAIL_BYTES,
    TOOL_DIRS,
    WATCH_LIMIT,
)
from ._result import SCHEMA, SCHEMA_VERSION, CheckResult, Difference, Finding, RunInfo  # noqa: F401
from ._script import Variant, check_script, parse_vary

__all__ = [
    "check",
    "assert_reproducible",
    "check_script",
    "CheckResult",
    "Difference",
    "Finding",
    "RunInfo",
    "Variant",
    "parse_vary",
]


class _CallableModule(types.ModuleType):
    """``fwd9m.check`` is both this module and the function :func:`check`: importing
    the submodule binds the name ``check`` on the package to the module, so the module
    itself is made callable and ``fwd9m.check(fn, ...)`` always works."""

    def __call__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> CheckResult:
        return check(fn, *args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
