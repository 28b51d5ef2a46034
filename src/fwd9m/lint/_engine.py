"""The lint engine: one pass over each file's syntax tree, dispatching nodes to rules.

Per file: decode (PEP 263 cookie, BOM), prefilter rules by their trigger words, parse,
walk the tree once in source order while tracking import aliases per scope
(``import torch as T``, ``from torch.backends import cudnn``), call each active rule's
``visit_<NodeType>`` handlers, then each rule's ``finish()``, and drop findings silenced
by ``# noqa`` / ``# noqa: FWD301``. A file that cannot be read, decoded or parsed, or
is too large, gives one engine diagnostic (FWD001-FWD004) and the run goes on; a rule
that raises is switched off for that file and reported as FWD004. Nothing here imports
a deep-learning framework.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import gc
import io
import re
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from ._helpers import FRAMEWORK_ROOTS
from ._rule import Rule

__all__ = ["Finding", "FileContext", "lint_source", "lint_bytes", "too_large", "ENGINE_CODES", "DEFAULT_MAX_BYTES"]

#: files larger than this many bytes are not parsed (FWD003); ``max-file-size`` in config
DEFAULT_MAX_BYTES = 5_000_000

#: engine diagnostics: code -> (name, what it means)
ENGINE_CODES = {
    "FWD001": ("syntax-error", "the file does not parse as Python, so no rule ran on it"),
    "FWD002": (
        "undecodable",
        "the file is not valid text in its declared encoding (UTF-8 unless a coding cookie says otherwise)",
    ),
    "FWD003": ("too-large", "the file is larger than max-file-size and was not checked"),
    "FWD004": ("internal-error", "a rule failed on this file; the other rules still ran"),
}

_BUILTINS = frozenset(dir(builtins))
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.I)
_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef})
_EXIT = object()


@dataclass(frozen=True)
class Finding:
    """One finding. ``line`` and ``col`` are 1-based; ``fix`` is code to paste ("" if none)."""

    path: str
    line: int
    col: int
    code: str
    name: str
    message: str
    fix: str = ""
    end_line: int | None = None
    end_col: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def sort_key(self):
        return (self.path, self.line, self.col, self.code)


class FileContext:
    """What rules see of the file being linted: aliases, resolved calls, reporting."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.text = text
        self.scopes: list[dict[str, str | None]] = [{}]
        self.findings: list[Finding] = []
        #: resolved qualified name of every call -> call nodes, in source order
        self.calls: dict[str, list[ast.Call]] = {}
        #: method name (``x.NAME(...)``) -> call nodes, whatever the receiver
        self.methods: dict[str, list[ast.Call]] = {}
        #: imported module (full dotted name) -> line of its first import
        self.imports: dict[str, int] = {}
        self.tree: ast.Module | None = None
        self.function_stack: list[ast.AST] = []

    # -- names ---------------------------------------------------------------------------
    def lookup(self, name: str) -> str | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return name if name in _BUILTINS else None

    def qualname(self, node) -> str | None:
        """``T.nn.Dropout`` -> ``torch.nn.Dropout`` when ``import torch as T``; None when
        the base name is not an import or builtin (a local variable)."""
        attrs = []
        while type(node) is ast.Attribute:
            attrs.append(node.attr)
            node = node.value
        if type(node) is not ast.Name:
            return None
        base = self.lookup(node.id)
        if base is None:
            return None
        if attrs:
            attrs.reverse()
            return base + "." + ".".join(attrs)
        return base

    def bind(self, name: str, target: str | None) -> None:
        self.scopes[-1][name] = target

    def shadow(self, name: str) -> None:
        """A local definition hides an import or builtin of the same name."""
        if self.lookup(name) is not None:
            self.scopes[-1][name] = None

    def imports_any(self, *roots: str) -> bool:
        return any(m == r or m.startswith(r + ".") for m in self.imports for r in roots)

    def first_framework_import(self) -> int | None:
        lines = [ln for m, ln in self.imports.items() if m.split(".", 1)[0] in FRAMEWORK_ROOTS]
        return min(lines) if lines else None

    def called(self, names: Iterable[str]) -> list[ast.Call]:
        out = []
        for n in names:
            out.extend(self.calls.get(n, ()))
        return out

    def in_function(self, name: str) -> bool:
        return any(getattr(f, "name", None) == name for f in self.function_stack)

    # -- reporting -----------------------------------------------------------------------
    def add(self, rule: Rule | str, node, message: str, *, line=None, col=None, fix: str = ""):
        if isinstance(rule, str):
            code, name = rule, ENGINE_CODES[rule][0]
        else:
            code, name = rule.code, rule.name
            fix = fix or getattr(rule, "fix_code", "")
        if node is not None:
            line = getattr(node, "lineno", line or 1)
            col = getattr(node, "col_offset", 0) + 1 if col is None else col
            end_line = getattr(node, "end_lineno", None)
            end_col = getattr(node, "end_col_offset", None)
            end_col = end_col + 1 if end_col is not None else None
        else:
            end_line = end_col = None
        self.findings.append(Finding(self.path, line or 1, col or 1, code, name, message, fix, end_line, end_col))

    # -- imports -------------------------------------------------------------------------
    def _import(self, node: ast.Import) -> None:
        for a in node.names:
            self.imports.setdefault(a.name, node.lineno)
            if a.asname:
                self.bind(a.asname, a.name)
            else:
                root = a.name.split(".", 1)[0]
                self.bind(root, root)

    def _import_from(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            for a in node.names:  # relative import: a local module, never a framework
                if a.name != "*":
                    self.bind(a.asname or a.name, None)
            return
        self.imports.setdefault(node.module, node.lineno)
        for a in node.names:
            if a.name == "*":
                continue
            full = f"{node.module}.{a.name}"
            self.imports.setdefault(full, node.lineno)
            self.bind(a.asname or a.name, full)


#: fields that never hold nodes a rule needs (``ctx``/``op`` singletons, names, flags)
_SKIP_FIELDS = frozenset(
    {
        "ctx",
        "op",
        "id",
        "attr",
        "name",
        "arg",
        "module",
        "level",
        "kind",
        "type_comment",
        "is_async",
        "conversion",
        "names",
        "kwd_attrs",
        "rest",
        "lineno",
        "col_offset",
        "end_lineno",
        "end_col_offset",
        # annotations never run at training time: no rule looks inside them
        "annotation",
        "returns",
        "type_params",
        "type_ignores",
    }
)
#: evaluation order where it differs from field order
_ORDER = {
    ast.Assign: ("value", "targets"),
    ast.AugAssign: ("value", "target"),
    ast.AnnAssign: ("value", "target", "annotation"),
    ast.For: ("iter", "target", "body", "orelse"),
    ast.AsyncFor: ("iter", "target", "body", "orelse"),
    ast.comprehension: ("iter", "target", "ifs"),
    ast.NamedExpr: ("value", "target"),
}


def _child_fields(t: type) -> tuple[str, ...]:
    if t in _ORDER:
        return _ORDER[t]
    if t is ast.Constant:
        return ()
    if t is ast.alias:
        return ()
    return tuple(f for f in t._fields if f not in _SKIP_FIELDS)


#: node type -> its child fields, last first (the walk pushes them on a stack)
_FIELDS: dict[type, tuple[str, ...]] = {}


class _Walker:
    def __init__(self, ctx: FileContext, rules: list[Rule]):
        self.ctx = ctx
        self.failed: set[Rule] = set()
        self.dispatch: dict[type, list] = {}
        for rule in rules:
            for attr in dir(type(rule)):
                if attr.startswith("visit_"):
                    t = getattr(ast, attr[6:], None)
                    if t is not None:
                        self.dispatch.setdefault(t, []).append(getattr(rule, attr))

    def _fail(self, handler, exc: BaseException) -> None:
        rule = handler.__self__
        self.failed.add(rule)
        for handlers in self.dispatch.values():
            handlers[:] = [h for h in handlers if h.__self__ is not rule]
        self.ctx.add(
            "FWD004",
            None,
            f"rule {rule.code} ({rule.name}) failed on this file: {type(exc).__name__}: {exc}; please report it",
            line=1,
            col=1,
        )

    def walk(self, tree: ast.Module) -> None:
        ctx, dispatch, enter = self.ctx, self.dispatch, self._enter
        AST = ast.AST
        Call, Import, ImportFrom, Name, Store = ast.Call, ast.Import, ast.ImportFrom, ast.Name, ast.Store
        stack: list = [tree]
        pop, push, extend = stack.pop, stack.append, stack.extend
        while stack:
            node = pop()
            if node is None:  # a hole in a list field (Dict.keys for **d, kw_defaults)
                continue
            if node is _EXIT:
                ctx.scopes.pop()
                f = pop()
                if f is not None:
                    ctx.function_stack.pop()
                continue
            t = type(node)
            handlers = dispatch.get(t)
            if t is Call:
                qn = ctx.qualname(node.func)
                if qn is not None:
                    ctx.calls.setdefault(qn, []).append(node)
                if type(node.func) is ast.Attribute:
                    ctx.methods.setdefault(node.func.attr, []).append(node)
                if handlers:
                    for h in list(handlers):
                        try:
                            h(node, qn)
                        except Exception as exc:  # noqa: BLE001 - a rule bug must not stop the run
                            self._fail(h, exc)
            else:
                if t is Import:
                    ctx._import(node)
                elif t is ImportFrom:
                    ctx._import_from(node)
                elif t is Name and type(node.ctx) is Store:
                    ctx.shadow(node.id)
                if handlers:
                    for h in list(handlers):
                        try:
                            h(node)
                        except Exception as exc:  # noqa: BLE001
                            self._fail(h, exc)
            if t in _SCOPES:
                enter(node, t, push, extend)
                continue
            fields = _FIELDS.get(t)
            if fields is None:
                fields = _FIELDS[t] = _child_fields(t)[::-1]
            for name in fields:
                v = getattr(node, name, None)
                if v is None:
                    continue
                if type(v) is list:
                    if v:
                        extend(reversed(v))
                elif isinstance(v, AST):
                    push(v)

    def _enter(self, node, t: type, push, extend) -> None:
        """A function, class or lambda: its name bound outside, its decorators pushed to
        run in the enclosing scope, then its children and the scope exit (with the
        function, if one) pushed, and a new scope opened with its parameters."""
        ctx = self.ctx
        if t is not ast.Lambda:
            ctx.shadow(node.name)
            for d in node.decorator_list:  # run in the enclosing scope, after the
                push(d)  # body here (order does not matter to rules)
            if t is ast.ClassDef:
                children = [*node.bases, *node.keywords, *node.body]
            else:
                children = [node.args, *node.body]
        else:
            children = [node.args, node.body]
        is_fn = t in (ast.FunctionDef, ast.AsyncFunctionDef)
        push(node if is_fn else None)
        push(_EXIT)
        extend(reversed(children))
        ctx.scopes.append({})
        if is_fn:
            ctx.function_stack.append(node)
        if t is not ast.ClassDef:
            a = node.args
            for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
                if p is not None:
                    ctx.scopes[-1][p.arg] = None


#: the youngest generation's threshold while linting: a run allocates millions of
#: short-lived syntax-tree nodes that reference counting frees (trees have no cycles);
#: at Python's default (700) the cyclic collector ran thousands of times and scanned the
#: whole heap 35 times on 2,184 files, a fifth of the run (benchmarks/lint_speed.md)
_GC_THRESHOLD = 20_000


@contextlib.contextmanager
def few_collections():
    """Run the cyclic garbage collector less often inside the block (restored after it);
    a bigger threshold only changes when unreachable cycles are freed, never the result."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], _GC_THRESHOLD), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _decode(data: bytes) -> str:
    """Text of a Python source file per PEP 263 (cookie or BOM, else UTF-8)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


def _noqa_filter(findings: list[Finding], text: str) -> list[Finding]:
    if not findings or "noqa" not in text.lower():
        return findings
    lines = text.splitlines()
    out = []
    for f in findings:
        line = lines[f.line - 1] if 0 < f.line <= len(lines) else ""
        m = _NOQA.search(line) if "noqa" in line.lower() else None
        if m is None:
            out.append(f)
            continue
        codes = m.group("codes")
        if codes is None:
            continue  # bare ``# noqa`` silences every code on the line
        wanted = {c.upper() for c in re.split(r"[,\s]+", codes) if c}
        if not any(f.code.startswith(c) for c in wanted):
            out.append(f)
    return out


#: a notebook exported as a script: IPython shell and magic lines (``!pip install x``,
#: ``%matplotlib inline``, ``%%time``), not a ``%`` continuation of an expression
_IPYTHON_LINE = re.compile(r"^([ \t]*)(?:![^=\s]|%%?[A-Za-z_]).*$", re.M)


#: Python 2 syntax that Python 3 cannot parse in an old training script: ``except E, e:``
#: and the ``print x`` statement (LynnHo's ``v1/`` GAN scripts, golbin's tutorials)
_PY2_EXCEPT = re.compile(r"^([ \t]*except[ \t]+)([^:#\n]+?),[ \t]*([A-Za-z_]\w*)[ \t]*:", re.M)
_PY2_PRINT = re.compile(r"^([ \t]*)print[ \t]+(?![(=.,)\]])([^\n#]*?)[ \t]*$", re.M)
#: ``async`` as a keyword argument or parameter name, valid before Python 3.7 (PyTorch
#: 0.3's ``x.cuda(async=True)``, since renamed ``non_blocking``: bearpaw's
#: pytorch-classification training scripts), read as ``async_``
_PY36_ASYNC = re.compile(r"(?<![\w.])async(?=[ \t]*=(?!=))")


def _parse_script(text: str, path: str) -> ast.Module:
    """``ast.parse(text)``; when that fails in a file with IPython shell or magic lines
    (a Colab notebook saved as ``.py``), the file parsed with those lines read as ``pass``,
    and then with Python 2's ``except E, e:`` / ``print x`` and Python 3.6's ``async=``
    keyword read as Python 3.7+ (same line numbers), so the rules still run on its Python.
    The first error stands when that does not parse either."""
    return _parse(text, path)[0]


def _parse(text: str, path: str) -> tuple[ast.Module, bool]:
    """:func:`_parse_script`'s tree, and whether it is ``ast.parse(text)``'s (False: the
    IPython or Python 2 lines were rewritten)."""
    try:
        return ast.parse(text, filename=path), True
    except SyntaxError as exc:
        first = exc
    if _IPYTHON_LINE.search(text):
        text = _IPYTHON_LINE.sub(r"\1pass", text)
        try:
            return ast.parse(text, filename=path), False
        except SyntaxError:
            pass
    py3 = _PY36_ASYNC.sub("async_", _PY2_PRINT.sub(r"\1print(\2)", _PY2_EXCEPT.sub(r"\1\2 as \3:", text)))
    if py3 != text:
        try:
            return ast.parse(py3, filename=path), False
        except SyntaxError:
            pass
    raise first


def _parse_or_report(ctx: FileContext, on_tree: Callable[[ast.Module], object] | None) -> ast.Module | None:
    """The tree of ``ctx``'s text, or None with an FWD001 finding added; ``on_tree`` is
    called with ``ast.parse``'s tree (not one read with IPython lines as ``pass``)."""
    try:
        tree, plain = _parse(ctx.text, ctx.path)
    except SyntaxError as exc:
        ctx.add(
            "FWD001",
            None,
            f"syntax error: {exc.msg}; no rule ran on this file",
            line=exc.lineno or 1,
            col=exc.offset or 1,
        )
        return None
    except (ValueError, RecursionError, MemoryError) as exc:
        ctx.add("FWD001", None, f"cannot parse ({type(exc).__name__}: {exc}); no rule ran on this file", line=1, col=1)
        return None
    if plain and on_tree is not None:
        on_tree(tree)
    return tree


def lint_source(
    text: str,
    path: str,
    rule_classes: list[type[Rule]],
    *,
    trigger_re: re.Pattern | None = None,
    tree: ast.Module | None = None,
    on_tree: Callable[[ast.Module], object] | None = None,
) -> list[Finding]:
    """Findings of ``rule_classes`` on source ``text`` (already decoded), sorted.

    ``trigger_re`` (a regex that finds identifiers) skips rules, and parsing, when
    none of their trigger words (or none of their required words) occurs in the text as
    an identifier (the file is still parsed, for FWD001); ``tree`` is a tree already parsed from
    ``text`` (the flake8 adapter passes flake8's). ``on_tree`` is called with the tree this
    function parses when it is ``ast.parse(text)``'s (the imports of the file, read once)."""
    if trigger_re is not None:
        words = set(trigger_re.findall(text))
        rule_classes = [
            r
            for r in rule_classes
            if (not r.triggers or not words.isdisjoint(r.triggers))
            and (not r.requires or not words.isdisjoint(r.requires))
        ]
    ctx = FileContext(path, text)
    if tree is None:  # parsed even when no rule is active: a file that does not parse gets FWD001
        tree = _parse_or_report(ctx, on_tree)
        if tree is None:
            return ctx.findings
    if not rule_classes:
        return []
    ctx.tree = tree
    rules = [cls(ctx) for cls in rule_classes]
    walker = _Walker(ctx, rules)
    try:
        walker.walk(tree)
    except RecursionError as exc:  # pragma: no cover - iterative walk; defensive
        ctx.add("FWD004", None, f"the file nests too deeply to check ({exc})", line=1, col=1)
    for rule in rules:
        if rule in walker.failed:
            continue
        try:
            rule.finish()
        except Exception as exc:  # noqa: BLE001
            ctx.add(
                "FWD004",
                None,
                f"rule {rule.code} ({rule.name}) failed on this file: {type(exc).__name__}: {exc}; please report it",
                line=1,
                col=1,
            )
    findings = _noqa_filter(ctx.findings, text)
    # one finding per (line, col, code): a rule may reach the same node twice
    unique = {(f.line, f.col, f.code): f for f in findings}
    return sorted(unique.values(), key=Finding.sort_key)


def too_large(path: str, size: int, max_bytes: int) -> Finding:
    """The FWD003 finding for a file of ``size`` bytes over ``max_bytes``."""
    return Finding(
        path,
        1,
        1,
        "FWD003",
        "too-large",
        f"file is {size:,} bytes, over max-file-size {max_bytes:,}; not checked "
        "(raise max-file-size in [tool.fwd9m.lint] to check it)",
    )


def lint_bytes(
    data: bytes,
    path: str,
    rule_classes: list[type[Rule]],
    *,
    trigger_re: re.Pattern | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    on_tree: Callable[[ast.Module], object] | None = None,
) -> list[Finding]:
    """Like :func:`lint_source` for raw file contents: decoding and size problems become
    FWD002/FWD003 findings, never exceptions."""
    if max_bytes and len(data) > max_bytes:
        return [too_large(path, len(data), max_bytes)]
    try:
        text = _decode(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        reason = exc.reason if isinstance(exc, UnicodeDecodeError) else str(exc)
        line = data.count(b"\n", 0, exc.start) + 1 if isinstance(exc, UnicodeDecodeError) else 1
        return [
            Finding(
                path,
                line,
                1,
                "FWD002",
                "undecodable",
                f"cannot decode the file ({reason}); save it as UTF-8 or declare its "
                "encoding with a '# -*- coding: ... -*-' line",
            )
        ]
    return lint_source(text, path, rule_classes, trigger_re=trigger_re, on_tree=on_tree)
