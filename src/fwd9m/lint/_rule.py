"""The rule base class and the registry of rules.

A rule is one class: its docstring is its documentation (sections "What it does",
"Why is this bad", "Example", "Fix"), ``valid`` and ``invalid`` hold code examples that
the test suite lints (each invalid one must give this rule's code, each valid one must
not), and ``visit_<NodeType>`` methods receive the nodes of the one pass over the tree
(``visit_Call(node, qn)`` also gets the call's resolved qualified name, or None).
``finish()`` runs after the pass, for rules that decide from facts about the whole file.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import PurePath
from typing import TYPE_CHECKING, ClassVar

from ._helpers import TRAINING_CALL

if TYPE_CHECKING:  # pragma: no cover
    from ._engine import FileContext

__all__ = ["Rule", "register", "REGISTRY", "SECTIONS", "in_test_code"]

#: a call that measures elapsed time (a speed benchmark's clock)
_TIMING = re.compile(r"\btime\.(?:time|perf_counter|monotonic|process_time)(?:_ns)?\(|\btimeit\b")

#: the headings every rule docstring has, in this order
SECTIONS = ("What it does", "Why is this bad", "Example", "Fix")

#: code -> rule class, filled by :func:`register`
REGISTRY: dict[str, type[Rule]] = {}


#: what a test module holds: a test function or class, a test framework import
_TEST_MARKS = re.compile(
    r"^[ \t]*(?:(?:async[ \t]+)?def[ \t]+test|class[ \t]+\w*Test|import[ \t]+(?:pytest|unittest)\b|"
    r"from[ \t]+(?:pytest|unittest|absl\.testing)\b)|\btf\.test\.TestCase\b",
    re.M,
)


def in_test_code(path: str, text: str = "") -> bool:
    """A pytest/unittest module: ``conftest.py``, or named ``test_*.py``/``*_test.py`` and
    holding a test (``def test_...``, a ``Test`` class, a pytest/unittest import; a
    tutorial named ``train_evalute_test.py`` is not one), or so named in a folder whose
    name starts with ``test`` (a test script a test suite launches, checked by asserts). Its draws, seeds and
    collectives set up one test, never a training or evaluation run, so by the judging
    standard no finding there is true (issue 29, fifth held-out round: 15 of the 23 false
    findings were in pytest files)."""
    name = PurePath(path).name
    if name == "conftest.py":
        return True
    named = name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
    if named and any(p.lower().startswith("test") for p in PurePath(path).parts[:-1]):
        return True  # a test script kept with the tests (accelerate's test_utils/scripts)
    return named and _TEST_MARKS.search(text) is not None


def in_docs_tooling(path: str, text: str = "") -> bool:
    """A script of a documentation folder (``docs/`` or ``doc/``: a Sphinx ``conf.py``, an
    API page generator) that calls no training function. It builds pages, never a
    training or evaluation run (issue 29, sixth held-out round: keras-rl's
    ``docs/autogen.py`` orders classes by ``id()``); a tutorial kept under ``docs/`` that
    trains (``.fit(``, ``.backward(``) is still linted."""
    parts = PurePath(path).parts[:-1]
    return any(p in ("docs", "doc") for p in parts) and TRAINING_CALL.search(text) is None


def in_speed_benchmark(path: str, text: str = "") -> bool:
    """A script of a benchmark folder (``benchmark/``, ``benchmarks/``) that times
    something (``time.time()``, ``time.perf_counter()``, ``timeit``) and calls no training
    function: its output is runtimes, which differ between runs whatever the inputs, so
    the random inputs it draws change no result (issue 29, seventh held-out round:
    keras-cv's ``benchmarks/metrics/coco/*_performance.py`` time a metric on random
    boxes). A benchmark that trains, or an untimed one, is still linted."""
    parts = PurePath(path).parts[:-1]
    if not any(p in ("benchmark", "benchmarks") for p in parts):
        return False
    return _TIMING.search(text) is not None and TRAINING_CALL.search(text) is None


class Rule:
    code: ClassVar[str] = ""
    name: ClassVar[str] = ""  #: kebab-case, unique
    message: ClassVar[str] = ""  #: default one-line message
    default: ClassVar[bool] = True  #: in the default selection (see ``_measured.OPT_IN``)
    #: (findings, true, false, debatable) measured on third-party code, or None
    measured: ClassVar[tuple[int, int, int, int] | None] = None
    measured_before: ClassVar[tuple[int, int, int, int] | None] = None  #: before the last fix
    opt_in_reason: ClassVar[str] = ""  #: why a measured rule is opt-in
    #: (findings, true, false, debatable) on issue 29's untuned held-out rounds, pooled
    heldout: ClassVar[tuple[int, int, int, int] | None] = None
    default_reason: ClassVar[str] = ""  #: why a rule below 0.9 held out is on by default
    #: identifiers of which at least one must occur in a file's text for the rule to run
    #: (an empty tuple: always runs). A prefilter: list every name the rule can match.
    triggers: ClassVar[frozenset[str] | tuple[str, ...]] = ()
    #: identifiers of which at least one must occur as well (an empty tuple: no such
    #: condition): e.g. the framework's import root for a rule that matches its calls
    requires: ClassVar[frozenset[str] | tuple[str, ...]] = ()
    references: ClassVar[tuple[str, ...]] = ()
    #: the edit ``fwd9m lint --fix`` makes for a finding: a name in ``fwd9m.fix._lint.EDITS``
    #: (which says whether it is safe), "" when the rule has none
    autofix: ClassVar[str] = ""
    valid: ClassVar[tuple[str, ...]] = ()
    invalid: ClassVar[tuple[str, ...]] = ()

    def __init__(self, ctx: FileContext):
        self.ctx = ctx

    def report(
        self,
        node: ast.AST | None,
        message: str | None = None,
        *,
        line: int | None = None,
        col: int | None = None,
        fix: str = "",
    ) -> None:
        """Add a finding at ``node``; ``fix``: code (or a comment) to paste for this very
        line, when it differs from the rule's general ``fix_code``. Nothing is reported in
        test code (:func:`in_test_code`), documentation tooling (:func:`in_docs_tooling`) or
        a speed benchmark (:func:`in_speed_benchmark`): they run no training or evaluation
        a user repeats."""
        test = self.ctx.__dict__.get("_rule_in_test_code")
        if test is None:
            path, text = self.ctx.path, self.ctx.text
            test = in_test_code(path, text) or in_docs_tooling(path, text) or in_speed_benchmark(path, text)
            self.ctx.__dict__["_rule_in_test_code"] = test
        if test:
            return
        self.ctx.add(self, node, message or self.message, line=line, col=col, fix=fix)

    def finish(self) -> None:
        """Called once after the pass over the file."""

    @classmethod
    def doc(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def summary(cls) -> str:
        """First line of the "What it does" section."""
        text = cls.doc()
        body = text.split("## What it does", 1)[-1].strip().split("\n\n", 1)[0]
        return " ".join(body.split())


def register(cls: type[Rule]) -> type[Rule]:
    """Class decorator: add a rule to :data:`REGISTRY` (codes and names must be unique)."""
    if cls.code in REGISTRY:
        raise ValueError(f"duplicate rule code {cls.code}")
    if any(r.name == cls.name for r in REGISTRY.values()):
        raise ValueError(f"duplicate rule name {cls.name}")
    REGISTRY[cls.code] = cls
    return cls
