"""The controlled hash-seed experiment that ``fwd9m check`` and ``fwd9m debug`` run when
runs differ and ``PYTHONHASHSEED`` was unset (string hashing salted per process,
https://docs.python.org/3/using/cmdline.html#envvar-PYTHONHASHSEED): one policy, one
wording, for both commands. No framework import.

The policy, at most :data:`MAX_RUNS` extra runs:

1. two runs with ``PYTHONHASHSEED=0``: they must agree, else hash order is ruled out as
   the only cause (``"ruled-out"``);
2. runs with seeds 1, 2, 3, one at a time, until one differs from seed 0 (with a small
   set, two seeds give the same order about half the time, so one other seed is not
   enough); none differs: ``"not-confirmed"`` (hash order is not excluded, only not shown);
3. the seed that differed runs again and must agree with its first run, else the
   difference comes and goes under a fixed seed (``"intermittent"``);
4. then the word ``"confirmed"`` needs the source to agree: a finding of fwd9m lint's
   hash-order rules (:data:`fwd9m._lint_hints.HASH_CODES`) in the script; without one the
   verdict is ``"likely"`` (a coin flip passes steps 1-3 about one time in five).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = [
    "CONFIRMED",
    "LIKELY",
    "NOT_CONFIRMED",
    "INTERMITTENT",
    "RULED_OUT",
    "INCOMPLETE",
    "OTHER_SEEDS",
    "MAX_RUNS",
    "Outcome",
    "experiment",
]

CONFIRMED, LIKELY, NOT_CONFIRMED = "confirmed", "likely", "not-confirmed"
INTERMITTENT, RULED_OUT, INCOMPLETE = "intermittent", "ruled-out", "incomplete"

#: seeds tried after the two runs with seed 0, one at a time
OTHER_SEEDS = (1, 2, 3)
#: extra runs at most: two with seed 0, one per other seed, one repeat
MAX_RUNS = 2 + len(OTHER_SEEDS) + 1

_ELSEWHERE = (
    "a race between threads or processes, or something from outside it (the time, "
    "a file an earlier run left, the network)"
)

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome:
    """What the experiment showed.

    ``verdict``: one of the module's constants; ``seed``: the seed whose runs differed
    from seed 0's (None when none did); ``runs``: extra runs made; ``lint``: the
    script's hash-order lint findings (dicts as :func:`fwd9m._lint_hints.findings`
    returns), looked up only when the runs point at hash order; ``target``: the
    script as the user named it, for the command to paste."""

    verdict: str
    seed: int | None = None
    runs: int = 0
    lint: tuple[dict[str, Any], ...] = field(default=())
    target: str = "SCRIPT"

    @property
    def hash_order(self) -> bool:
        """Whether the runs point at hash order (confirmed or likely)."""
        return self.verdict in (CONFIRMED, LIKELY)

    def message(self) -> str:
        """One paragraph for the report, the same in ``fwd9m check`` and ``fwd9m debug``."""
        s = self.seed
        if self.verdict == CONFIRMED:
            f = self.lint[0]
            return (
                f"PYTHONHASHSEED (confirmed): two runs with PYTHONHASHSEED=0 agreed, two with "
                f"PYTHONHASHSEED={s} agreed with each other and differed from them, and fwd9m lint "
                f"found hash-order code in the script ({f['path']}:{f['line']} {f['code']}): the "
                f"result depends on string hashing. Fix: iterate in a fixed order (sorted(s)), or "
                f"run with PYTHONHASHSEED=0 (fwd9m run does)."
            )
        if self.verdict == LIKELY:
            seeds = ", ".join(["0", "0", *(str(k) for k in OTHER_SEEDS if k < s), str(s), str(s)])
            return (
                f"PYTHONHASHSEED (likely): fixing PYTHONHASHSEED made {s + 3} runs agree, each with "
                f"the others of its seed (seeds {seeds}), and PYTHONHASHSEED={s} gave another result "
                f"than 0; fwd9m lint found no "
                f"hash-order pattern in the script, so an intermittent cause is not excluded: rerun "
                f"with --runs 4 under --env PYTHONHASHSEED=0 (fwd9m check --runs 4 --env "
                f"PYTHONHASHSEED=0 {self.target}); all agree: it is hash order (fix: sorted(s), or "
                f"PYTHONHASHSEED=0)."
            )
        if self.verdict == NOT_CONFIRMED:
            return (
                f"PYTHONHASHSEED (not confirmed): hash seeds 0-{OTHER_SEEDS[-1]} all gave the same "
                f"result ({self.runs} more runs), so the difference did not recur under a fixed "
                f"seed; hash order is not excluded, only not shown. The script may differ only "
                f"sometimes: {_ELSEWHERE}."
            )
        if self.verdict == INTERMITTENT:
            return (
                f"PYTHONHASHSEED (intermittent, not confirmed): a run with PYTHONHASHSEED={s} "
                f"differed from two agreeing runs with PYTHONHASHSEED=0, but a second run with "
                f"PYTHONHASHSEED={s} differed from the first: the result changes under a fixed seed, "
                f"so something besides the string-hash seed varies: {_ELSEWHERE}."
            )
        if self.verdict == RULED_OUT:
            return (
                "PYTHONHASHSEED (ruled out as the only cause): two runs with PYTHONHASHSEED=0 still "
                "differed, so hash order is not the cause (or not the only one)."
            )
        return (
            "PYTHONHASHSEED (untested): the runs with a fixed PYTHONHASHSEED meant to test it did not "
            "complete, so it remains a possible cause."
        )


def experiment(
    run: Callable[[int, int], T],
    agree: Callable[[T, T], bool],
    *,
    script: str | None = None,
    target: str = "SCRIPT",
    progress: Callable[[str], None] | None = None,
    errors: tuple[type[BaseException], ...] = (),
    argv: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> Outcome:
    """Run the experiment of the module docstring.

    Args:
        run: ``run(seed, k)`` runs the program once with ``PYTHONHASHSEED=seed`` (``k``:
            the extra run's number, 1-based, at most :data:`MAX_RUNS`) and returns a handle.
        agree: ``agree(a, b)`` whether two handles' results agree (where the commands
            compare: every output for check, up to the first divergent op for debug).
        script: the script's path, linted for hash-order code (None: a module or a
            command; the verdict is then at most ``"likely"``).
        target: the script as the user named it, quoted in the advice.
        progress: called with a one-line message before each stage.
        errors: exceptions of ``run``/``agree`` that mean a run did not complete
            (verdict ``"incomplete"``); others propagate.
        argv, env: the runs' ``sys.argv`` and environment (None: unknown): only
            hash-order code on a branch that ran confirms (:func:`fwd9m._lint_hints.findings`).

    Returns:
        An :class:`Outcome`.
    """
    say = progress or (lambda msg: None)
    made = 0

    def one(seed: int) -> T:
        nonlocal made
        made += 1
        return run(seed, made)

    try:
        say(
            "testing the string-hash seed (PYTHONHASHSEED was unset): two more runs with PYTHONHASHSEED=0 "
            "(they must agree), then seeds 1, 2, 3 until one differs, and that seed once more"
        )
        zero = one(0)
        if not agree(zero, one(0)):
            say(
                "the two PYTHONHASHSEED=0 runs differ too, so hash order is not the (only) cause; "
                "no more hash-seed runs"
            )
            return Outcome(RULED_OUT, runs=made, target=target)
        for seed in OTHER_SEEDS:
            say(f"the PYTHONHASHSEED=0 runs agree; a run with PYTHONHASHSEED={seed}")
            first = one(seed)
            if agree(zero, first):
                continue
            say(f"PYTHONHASHSEED={seed} differs from 0; once more with {seed} (it must agree with itself)")
            if not agree(first, one(seed)):
                return Outcome(INTERMITTENT, seed, made, target=target)
            break
        else:
            return Outcome(NOT_CONFIRMED, runs=made, target=target)
    except errors:
        return Outcome(INCOMPLETE, runs=made, target=target)
    from ._lint_hints import findings

    # only code that ran confirms: not a line on a branch not taken, nor one that may not have run
    lint = tuple(f for f in findings(script, "hashseed", argv=argv, env=env) if not f["branch"]) if script else ()
    return Outcome(CONFIRMED if lint else LIKELY, seed, made, lint, target)
