"""The flake8 adapter: ``flake8 --select FWD`` runs fwd9m's lint rules.

Registered in ``pyproject.toml`` as ``[project.entry-points."flake8.extension"] FWD =
"fwd9m.lint.flake8:Plugin"``. flake8 parses the file and handles ``# noqa`` and
``--select/--ignore``; this adapter runs fwd9m's default rules on flake8's tree (plus
opt-in rules named explicitly in ``--select``/``--extend-select``). When ``--select``
is given without any FWD code (``flake8 --select B``) the plugin does no work at all.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .. import __version__

__all__ = ["Plugin"]


def _mentions_fwd(codes) -> bool:
    return any(str(c).upper().startswith("FWD") or "FWD".startswith(str(c).upper()) for c in codes or ())


class Plugin:
    name = "fwd9m"
    version = __version__
    enabled = True
    _selection = None  #: (rule classes, trigger regex), built once per flake8 run

    def __init__(self, tree: ast.AST, filename: str, lines: list[str]):
        self.tree = tree
        self.filename = filename
        self.lines = lines

    @classmethod
    def parse_options(cls, options) -> None:
        select = getattr(options, "select", None)
        extend = getattr(options, "extend_select", None)
        cls.enabled = not select or _mentions_fwd(select) or _mentions_fwd(extend)
        from . import _trigger_re
        from ._config import Config

        wanted = [
            c for c in (*(select or ()), *(extend or ())) if str(c).upper().startswith("FWD") and len(str(c)) == 6
        ]
        config = Config()
        known = set(config.rules())
        from .rules import all_rules

        extra = [all_rules()[c] for c in wanted if c in all_rules() and all_rules()[c] not in known]
        rules = sorted({*known, *extra}, key=lambda r: r.code)
        cls._selection = (rules, _trigger_re(rules))

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        if not self.enabled:
            return
        if self._selection is None:
            type(self).parse_options(object())
        from ._engine import lint_source

        rules, trigger_re = self._selection
        text = "".join(self.lines)
        tree = self.tree if isinstance(self.tree, ast.Module) else None
        for f in lint_source(text, self.filename, rules, trigger_re=trigger_re, tree=tree):
            yield f.line, f.col - 1, f"{f.code} {f.message}", type(self)
