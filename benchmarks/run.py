#!/usr/bin/env python
"""Run the ratio benchmarks: ``python benchmarks/run.py [--quick] [--json] [NAME_FILTER]``.

Every figure is candidate/baseline measured in this run (see ``_harness.py``).
Exit status 1 if a case misses its target.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import run_case  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("filter", nargs="?", default="", help="only cases whose name contains this")
    ap.add_argument("--quick", action="store_true", help="fewer repeats, smaller workloads")
    ap.add_argument("--json", action="store_true", help="print results as JSON")
    args = ap.parse_args()
    results, failed = [], False
    for path in sorted(HERE.glob("bench_*.py")):
        module = importlib.import_module(path.stem)
        try:
            cases = module.cases(args.quick)
        except ImportError as exc:
            print(f"{path.stem}: skipped ({exc})", file=sys.stderr)
            continue
        for case in cases:
            if args.filter not in case.name:
                continue
            try:
                r = run_case(case)
            except Exception:
                traceback.print_exc()
                failed = True
                continue
            results.append(r)
            if r["meets_target"] is False:
                failed = True
            if not args.json:
                cmp = ">=" if r["higher_is_better"] else "<="
                target = f"target {cmp} {r['target']:g}" if r["target"] is not None else "no target"
                verdict = {True: "ok", False: "MISSED", None: ""}[r["meets_target"]]
                print(
                    f"{r['name']:<48} {r['ratio']:8.3f}x vs {r['baseline']}  "
                    f"({r['candidate_s'] * 1e3:.2f} ms / {r['baseline_s'] * 1e3:.2f} ms; "
                    f"{target}) {verdict}",
                    flush=True,
                )
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
