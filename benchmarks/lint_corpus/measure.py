"""Measure ``fwd9m lint`` on a corpus of third-party training code against hand
judgments.

    python benchmarks/lint_corpus/measure.py CORPUS [--all-rules] [--unjudged]

CORPUS holds one folder per repository named ``owner+name`` (the repositories and
commits are in ``repos.txt``; extract each with ``git archive <commit> | tar -x -C
CORPUS/owner+name``). Third-party code is never committed here, only:

- ``judgments.csv``: findings judged by hand (repo, commit, path, line, rule, verdict
  T true / F false / D debatable, one-line reason);
- ``recall.csv``: real pitfalls found by reading training scripts (repo, commit, path,
  line, rule, what it is); a pitfall counts as found when a finding of that rule is
  within 3 lines of it (line 0: anywhere in the file).

Prints, per rule: findings, judged T/F/D, precision T/(T+F) (debatable left out) and
strict precision T/(T+F+D); then the default selection's totals and recall. Findings
with no judgment are counted as "unjudged" (``--unjudged`` lists them to judge). Exit 0;
2 when CORPUS is missing.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
WINDOW = 3  #: lines between a recall item and the finding that counts for it


def _rows(name: str) -> list[dict]:
    path = HERE / name
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def run_lint(corpus: Path, all_rules: bool):
    from fwd9m import lint
    from fwd9m.lint import Config

    roots = sorted(p for p in corpus.iterdir() if p.is_dir())
    config = Config(select=["ALL"]) if all_rules else Config()
    t0 = time.perf_counter()
    report = lint.lint_paths(roots, config)
    seconds = time.perf_counter() - t0
    out = []
    for f in report.findings:
        rel = Path(f.path).resolve().relative_to(corpus.resolve()).as_posix()
        repo, path = rel.split("/", 1)
        out.append((repo.replace("+", "/", 1), path, f.line, f.code, f.message))
    return out, report.files, seconds


def measure(corpus: Path, all_rules: bool = False, show_unjudged: bool = False) -> dict:
    from fwd9m import lint

    findings, files, seconds = run_lint(corpus, all_rules)
    judged = defaultdict(list)  # one verdict per finding; a line can hold two findings of a rule
    for r in _rows("judgments.csv"):
        judged[(r["repo"], r["path"], int(r["line"]), r["rule"])].append(r["verdict"])
    counts: dict[str, Counter] = defaultdict(Counter)
    unjudged = []
    for repo, path, line, code, msg in findings:
        left = judged.get((repo, path, line, code))
        v = left.pop(0) if left else None
        counts[code][v or "unjudged"] += 1
        if v is None:
            unjudged.append((repo, path, line, code, msg))
    rules = lint.all_rules()
    print(f"{files} files, {len(findings)} findings in {seconds:.1f} s")
    print(f"{'rule':8} {'default':7} {'n':>4} {'T':>4} {'F':>4} {'D':>4} {'unj':>4} {'prec':>6} {'strict':>6}")
    total = Counter()
    for code in sorted(counts):
        c = counts[code]
        t, f, d = c["T"], c["F"], c["D"]
        on = code not in rules or rules[code].default
        if on:
            total.update(c)
        prec = f"{t / (t + f):.2f}" if t + f else "-"
        strict = f"{t / (t + f + d):.2f}" if t + f + d else "-"
        print(
            f"{code:8} {'yes' if on else 'opt-in':7} {sum(c.values()):4} {t:4} {f:4} {d:4} "
            f"{c['unjudged']:4} {prec:>6} {strict:>6}"
        )
    t, f, d = total["T"], total["F"], total["D"]
    precision = t / (t + f) if t + f else float("nan")
    print(
        f"default rules: {t} true, {f} false, {d} debatable, {total['unjudged']} unjudged: "
        f"precision {precision:.3f} (strict {t / max(1, t + f + d):.3f})"
    )
    present = {p.name.replace("+", "/", 1) for p in corpus.iterdir() if p.is_dir()}
    recall_rows = [r for r in _rows("recall.csv") if r["repo"] in present]  # this corpus's rounds only
    at = defaultdict(list)
    for repo, path, line, code, _ in findings:
        at[(repo, path, code)].append(line)
    found = [
        r
        for r in recall_rows
        if any(
            int(r["line"]) == 0 or abs(x - int(r["line"])) <= WINDOW
            for x in at.get((r["repo"], r["path"], r["rule"]), ())
        )
    ]
    recall = len(found) / len(recall_rows) if recall_rows else float("nan")
    print(f"recall: {len(found)} of {len(recall_rows)} pitfalls found ({recall:.3f})")
    missed = [r for r in recall_rows if r not in found]
    for r in missed:
        print(f"  missed {r['rule']} {r['repo']}/{r['path']}:{r['line']}: {r['what']}")
    if show_unjudged:
        for repo, path, line, code, msg in unjudged:
            print(f"UNJUDGED\t{repo}\t{path}\t{line}\t{code}\t{msg}")
    return {
        "precision": precision,
        "recall": recall,
        "unjudged": len(unjudged),
        "files": files,
        "seconds": seconds,
        "counts": {k: dict(v) for k, v in counts.items()},
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("corpus", type=Path)
    p.add_argument("--all-rules", action="store_true", help="also run opt-in rules")
    p.add_argument("--unjudged", action="store_true", help="list findings that have no judgment")
    a = p.parse_args(argv)
    if not a.corpus.is_dir():
        print(f"no corpus at {a.corpus}: extract the repositories of {HERE / 'repos.txt'} there", file=sys.stderr)
        return 2
    measure(a.corpus, a.all_rules, a.unjudged)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parents[1] / "src"))
    sys.exit(main())
