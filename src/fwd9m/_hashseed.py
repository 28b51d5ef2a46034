"""The controlled hash-seed experiment that ``fwd9m check`` and ``fwd9m debug`` run when
runs differ and ``PYTHONHASHSEED`` was unset (string hashing salted per process,
https://docs.python.org/3/using/cmdline.html#envvar-PYTHONHASHSEED): one policy, one
wording, for both commands. No framework import.

The policy, three extra runs (a fourth only when the three agree):

1. run 1 with ``PYTHONHASHSEED=0``, run 2 with ``PYTHONHASHSEED=1``, run 3 with 0 again
   (side by side where the caller's ``together`` runs them so);
2. run 3 differs from run 1: something besides the string-hash seed varies, so hash
   order is ruled out as the only cause (``"ruled-out"``);
3. run 3 agrees with run 1 and run 2 differs: string hashing alone changes the result;
   all agree: run 4 with ``PYTHONHASHSEED=2`` (two seeds give a small set the same order
   about half the time, so one other seed is not enough to clear it); it differs: as
   in the first case; it agrees too: ``"not-confirmed"`` (hash order is not excluded,
   only not shown);
4. then the word ``"confirmed"`` needs the source to agree: a finding of fwd9m lint's
   hash-order rules (:data:`fwd9m._lint_hints.HASH_CODES`) in the script; without one the
   verdict is ``"likely"`` (a coin flip passes step 3 about one time in four).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

__all__ = [
    "CONFIRMED",
    "LIKELY",
    "NOT_CONFIRMED",
    "RULED_OUT",
    "INCOMPLETE",
    "SEEDS",
    "MAX_RUNS",
    "Outcome",
    "experiment",
]

CONFIRMED, LIKELY, NOT_CONFIRMED = "confirmed", "likely", "not-confirmed"
RULED_OUT, INCOMPLETE = "ruled-out", "incomplete"

#: the seeds of the extra runs: runs 1 and 3 with the first, run 2 with the second,
#: run 4 (only when the first three agree) with the third
SEEDS = (0, 1, 2)
#: extra runs at most
MAX_RUNS = 4

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
        s, zero = self.seed, SEEDS[0]
        if self.verdict in (CONFIRMED, LIKELY):
            agreed = "" if s == SEEDS[1] else f" and one with PYTHONHASHSEED={SEEDS[1]} agreed with them"
            shown = f"two runs with PYTHONHASHSEED={zero} agreed{agreed}, and one with PYTHONHASHSEED={s} "
            shown += "differed from them"
        if self.verdict == CONFIRMED:
            f = self.lint[0]
            return (
                f"PYTHONHASHSEED (confirmed): {shown}, and fwd9m lint found hash-order code in the script "
                f"({f['path']}:{f['line']} {f['code']}): the result depends on string hashing. Fix: iterate "
                f"in a fixed order (sorted(s)), or run with PYTHONHASHSEED=0 (fwd9m run does)."
            )
        if self.verdict == LIKELY:
            return (
                f"PYTHONHASHSEED (likely): {shown}; fwd9m lint found no hash-order pattern in the script, "
                f"so an intermittent cause is not excluded (a coin flip gives these results one time in "
                f"four): rerun with --runs 4 under --env PYTHONHASHSEED=0 (fwd9m check --runs 4 --env "
                f"PYTHONHASHSEED=0 {self.target}); all agree: it is hash order (fix: sorted(s), or "
                f"PYTHONHASHSEED=0)."
            )
        if self.verdict == NOT_CONFIRMED:
            seeds = ", ".join(str(k) for k in SEEDS)
            return (
                f"PYTHONHASHSEED (not confirmed): hash seeds {seeds} all gave the same result ({self.runs} "
                f"more runs), so the difference did not recur under a fixed seed; hash order is not "
                f"excluded, only not shown. The script may differ only sometimes: {_ELSEWHERE}."
            )
        if self.verdict == RULED_OUT:
            return (
                f"PYTHONHASHSEED (ruled out as the only cause): two runs with PYTHONHASHSEED={zero} still "
                f"differed, so hash order is not the cause (or not the only one): something besides the "
                f"string-hash seed varies, such as {_ELSEWHERE}."
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
    together: Callable[[list[tuple[int, int]]], list[T]] | None = None,
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
        together: ``together([(seed, k), ...])`` runs the first three extra runs (side
            by side where the machine allows) and returns their handles in order
            (default: one after the other with ``run``).

    Returns:
        An :class:`Outcome`.
    """
    say = progress or (lambda msg: None)
    a, b = SEEDS[:2]
    first = [(a, 1), (b, 2), (a, 3)]
    say(
        f"testing the string-hash seed (PYTHONHASHSEED was unset): three more runs, with PYTHONHASHSEED={a}, "
        f"{b} and {a} again; the two {a}-runs must agree, and the {b}-run differs from them if string "
        f"hashing changes the result"
    )
    try:
        one, other, again = together(first) if together is not None else [run(s, k) for s, k in first]
        if not agree(one, again):
            say(f"the two PYTHONHASHSEED={a} runs differ, so hash order is not the (only) cause")
            return Outcome(RULED_OUT, runs=3, target=target)
        seed, made = b, 3
        if agree(one, other):
            seed, made = SEEDS[2], 4
            say(f"PYTHONHASHSEED={a} and {b} agree (a small set may keep its order); one more with {seed}")
            if agree(one, run(seed, 4)):
                return Outcome(NOT_CONFIRMED, runs=made, target=target)
    except errors:
        return Outcome(INCOMPLETE, runs=MAX_RUNS, target=target)
    from ._lint_hints import findings

    # only code that ran confirms: not a line on a branch not taken, nor one that may not have run
    lint = tuple(f for f in findings(script, "hashseed", argv=argv, env=env) if not f["branch"]) if script else ()
    return Outcome(CONFIRMED if lint else LIKELY, seed, made, lint, target)
