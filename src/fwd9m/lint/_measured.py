"""Measured precision of each rule on third-party training code, and the rules that are
therefore opt-in.

Figures from ``benchmarks/lint_corpus/measure.py`` over the 13 repositories of
``benchmarks/lint_corpus/repos.txt`` (2,483 files), every finding judged by hand
(``judgments.csv``): true, false, debatable. Precision is true / (true + false);
debatable findings are left out of it and shown beside it. A rule is on by default
only when it was measured at >= 0.9 (:data:`THRESHOLD`); a rule with too few findings
to measure keeps its setting and says so. Re-measure after changing a rule and update
this table (``measure.py`` prints it).
"""

from __future__ import annotations

__all__ = ["MEASURED", "BEFORE", "THRESHOLD", "OPT_IN", "apply"]

THRESHOLD = 0.9
#: code -> (findings, true, false, debatable) after the fixes of this version
MEASURED: dict[str, tuple[int, int, int, int]] = {
    "FWD001": (2, 2, 0, 0), "FWD108": (12, 11, 0, 1), "FWD109": (1, 0, 0, 1), "FWD201": (7, 3, 0, 4),
    "FWD203": (1, 0, 0, 1), "FWD207": (1, 1, 0, 0), "FWD209": (1, 1, 0, 0), "FWD301": (2, 2, 0, 0),
    "FWD303": (14, 14, 0, 0), "FWD304": (1, 1, 0, 0), "FWD307": (1, 1, 0, 0), "FWD401": (12, 1, 4, 7),
    "FWD402": (4, 2, 1, 1), "FWD601": (66, 16, 2, 48), "FWD602": (3, 2, 0, 1), "FWD701": (1, 0, 0, 1),
    "FWD503": (1, 1, 0, 0),
}
#: the same figures before this version's fixes, for rules they changed
BEFORE: dict[str, tuple[int, int, int, int]] = {
    "FWD102": (5, 0, 5, 0), "FWD103": (5, 0, 2, 3), "FWD108": (8, 2, 5, 1), "FWD202": (2, 0, 2, 0),
    "FWD203": (4, 0, 2, 2), "FWD207": (2, 1, 1, 0), "FWD307": (3, 1, 2, 0), "FWD310": (1, 0, 1, 0),
    "FWD402": (5, 2, 2, 1), "FWD601": (91, 13, 24, 54), "FWD602": (4, 2, 1, 1), "FWD701": (2, 0, 1, 1),
    "FWD703": (2, 0, 2, 0), "FWD704": (2, 0, 2, 0),
}
#: code -> why it is opt-in, shown in the docs. ``fwd9m check`` / ``fwd9m debug`` hints
#: run these too: once runs are known to differ, a lower-precision pointer still helps.
#: Rules whose judged false findings were all removed by a fix, leaving too few findings
#: to measure again (FWD102, FWD103, FWD202, FWD310, FWD703, FWD704), keep their default
#: and show the figures from before the fix.
OPT_IN: dict[str, str] = {
    "FWD503": "new; one finding in 3,800 files of the corpus (true), too few to measure: on by "
              "default once measured at >= 0.9 on more Keras training code",
    "FWD401": "listing order rarely reaches a result (files rewritten in place, single files, "
              "sorted later): 1 true, 4 false, 7 debatable",
    "FWD402": "the element type of a set built from unknown values is not inferred: 2 true, 1 false",
    "FWD601": "most findings are one key for init and apply in tests (debatable) or reuse that draws "
              "nothing: 16 true, 2 false, 48 debatable",
}


def apply(rules: dict) -> None:
    """Set each rule class's ``measured`` figures and turn the rules of :data:`OPT_IN` off
    by default."""
    for code, cls in rules.items():
        cls.measured = MEASURED.get(code)
        cls.measured_before = BEFORE.get(code)
        cls.opt_in_reason = OPT_IN.get(code, "")
        if code in OPT_IN:
            cls.default = False
