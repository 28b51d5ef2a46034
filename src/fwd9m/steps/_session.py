"""Where step records go in a process: a :class:`StepSession` writes them to a digest
file and/or compares them live with a reference file, and stops the run at the first
step that differs.

``fwd9m run --digests FILE --against REF`` configures the process's session through
:data:`ENV_OUT` and :data:`ENV_AGAINST` (:func:`from_env`); a source (the PyTorch
optimizer hook, a callback, :func:`step_digest`) hands each step's entries to
:meth:`StepSession.record`. An integration that knows more than the automatic hook
(the loss, the batch) :meth:`~StepSession.claim`\\ s the session before the first
step, and the automatic hook stands down, so each step is recorded once.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from .._files import shown
from .._import_hook import after_import
from .._ranks import rank_info
from ._format import StepRecord, StepWriter

__all__ = [
    "ENV_AGAINST",
    "ENV_CHECK",
    "ENV_OUT",
    "ENV_RANK_INDEPENDENT",
    "DivergenceExit",
    "StepSession",
    "for_path",
    "from_env",
    "start",
]

#: digest file to write (``fwd9m run --digests FILE``)
ENV_OUT = "FWD9M_STEPS_OUT"
#: reference digest file to compare against (``fwd9m run --against REF``)
ENV_AGAINST = "FWD9M_STEPS_AGAINST"
#: directory where each process of a ``fwd9m check`` run writes its step stream,
#: ``steps-<pid>``, quietly (the early stop, :mod:`fwd9m.check._lockstep`)
ENV_CHECK = "FWD9M_STEPS_CHECK"
#: ``fwd9m run --rank-independent``: compare only the rank-independent groups
#: (:data:`~._compare.RANK_INDEPENDENT`), also with a reference of another world size
ENV_RANK_INDEPENDENT = "FWD9M_STEPS_RANK_INDEPENDENT"
#: the source that automatic hooks give; a claimed session ignores it
AUTO = "auto"
#: in ``--digests``/``--against``: this process's rank (one file per rank)
RANK = "{rank}"


class DivergenceExit(SystemExit):
    """Raised at the first step that differs from the reference: the run stops with
    exit status 1 (a ``SystemExit``, so a script's ``except Exception`` does not swallow
    it). The report was printed to stderr; it is also ``report``."""

    def __init__(self, report: Any) -> None:
        super().__init__(1)
        self.report = report


class StepSession:
    """Writes step records to ``out`` and/or compares them with ``against``.

    Args:
        out: digest file to write (replaced only if it is a digest file), or None.
        against: reference digest file, or None.
        stop: at the first difference, raise :class:`DivergenceExit` (else keep going;
            ``report`` holds the first difference).
        rank_independent: compare only the groups that do not depend on the rank
            (:data:`~._compare.RANK_INDEPENDENT`); a per-rank reference of another world
            size is then compared too (this rank's file, or the reference's rank 0).
    Raises:
        ConfigurationError: ``out`` exists and is not a digest file.
        FileFormatError: ``against`` is not a readable digest file.
    """

    def __init__(
        self,
        out: str | None = None,
        against: str | None = None,
        *,
        stop: bool = True,
        program: dict | None = None,
        quiet: bool = False,
        keep_old: bool = True,
        rank_independent: bool = False,
    ) -> None:
        from ._compare import RANK_INDEPENDENT, Against

        #: compare only the rank-independent groups, with a reference of any world size
        self.groups = RANK_INDEPENDENT if rank_independent else None

        #: per-rank streams: ``out`` and ``against`` name one file per rank with ``{rank}``,
        #: resolved at the first step, when the rank is known (a process group or a launcher)
        self.patterns = (out, against) if RANK in (out or "") + (against or "") else None
        self.per_rank = bool(self.patterns)
        #: the ranks that differ at a step, agreed through the job's process group
        #: (set by the framework's hooks: ``steps._torch.ranks_that_differ``), or None
        self.agree: Any = None
        if self.patterns:
            out = against = None
        self.out, self.stop = out, stop
        self.program = program or {"argv": list(sys.argv)}
        self.against = Against(against, groups=self.groups) if against else None
        self.writer: StepWriter | None = None
        self.claimed: str | None = None
        self.steps = 0
        self.report: Any = None
        self.closed = False
        self.failed = 0
        self.quiet = quiet  #: no messages on stderr (under fwd9m check, whose stderr is the script's)
        #: an existing ``out`` is replaced only by a completed run (:class:`~._format.StepWriter`)
        self.keep_old = keep_old
        self.pid = os.getpid()  #: a forked child that trains records nothing: the file is this process's
        #: under ``fwd9m check``'s lock step: waits after each step for the check's word
        self.gate: Any = None
        if out and not self.patterns:  # refuse a file fwd9m must not replace now, not at the first step
            from ._format import check_replaceable

            check_replaceable(out)

    def claim(self, source: str) -> None:
        """An integration takes over recording from the automatic hooks."""
        self.claimed = source

    def _header(self) -> dict[str, Any]:
        from .. import environment

        # who records the steps: "auto" (the PyTorch optimizer hook: one record per
        # optimizer.step()) or the integration that claimed the session
        source = self.claimed or AUTO
        header = {"program": self.program, "created": time.time(), "environment": environment.collect()}
        try:
            info = rank_info()
            header["rank"] = {"rank": info.rank, "world_size": info.world_size, "launcher": info.source}
        except Exception:  # noqa: BLE001 - a misconfigured launcher: the header goes without
            pass
        return {**header, "source": source}

    def _resolve(self) -> None:
        """Per-rank streams: this process's files, from its rank (``rank_info``)."""
        from ._compare import Against, reference_rank
        from ._format import check_replaceable

        out, against = self.patterns or (None, None)
        info = rank_info()
        rank = str(info.rank)
        self.out = out.replace(RANK, rank) if out else None
        if self.out:
            check_replaceable(self.out)
        self.patterns = None
        if not against:
            return
        # this rank's reference, or (none: another world size) the reference's lowest rank's
        self.against = Against(reference_rank(against, info.rank), groups=self.groups)
        ref = self.against.reader.header.get("rank") or {}
        if self.groups is None and isinstance(ref, dict) and ref.get("world_size") not in (None, info.world_size):
            print(
                f"fwd9m: error: the reference was recorded by a job of {ref['world_size']} ranks, this job has "
                f"{info.world_size}: rank r of one is not rank r of the other, so no step can be compared; "
                f"record a reference with {info.world_size} ranks (fwd9m run --digests DIR/ -- ...), or compare "
                f"only the loss and the replicated parameters: fwd9m run --against DIR/ --rank-independent -- ...",
                file=sys.stderr,
                flush=True,
            )
            raise SystemExit(2)
        if self.groups is None and self.against.reader.path != against.replace(RANK, rank):
            self.against.reader.close()
            self.against = Against(against.replace(RANK, rank))  # missing: FileFormatError

    def _start(self) -> None:
        if self.patterns:
            self._resolve()
        header = self._header()
        if self.out:
            self.writer = StepWriter(self.out, header, keep_old=self.keep_old)
        if self.against is not None:
            self.against.set_header(header)

    def record(self, entries: list[tuple[str, str, str, int]], step: int | None = None, source: str = AUTO) -> bool:
        """Record one step (``step`` defaults to the count so far). Returns False when
        the session ignored it (another source claimed it, or it stopped).

        Raises:
            DivergenceExit: the step differs from the reference and ``stop`` is set.
        """
        if self.closed or self.report is not None or (source == AUTO and self.claimed) or os.getpid() != self.pid:
            return False
        if self.steps == 0 and self.writer is None:
            self._start()
        number = self.steps if step is None else int(step)
        if self.writer is not None:
            self.writer.step(number, entries)
        self.steps += 1
        if self.against is not None:
            record = StepRecord(number, {(g, n): (m, d) for g, n, m, d in entries})
            report = self.against.step(record)
            if self.per_rank and self.agree is not None:  # every rank stops at this step together
                report = self._agreed(report, number)
            if report is not None:
                self._diverged(report)
        if self.gate is not None:
            self.gate.step()
        return True

    def _agreed(self, report: Any, step: int) -> Any:
        """``report``, or, on a rank that agrees while another differs, a report saying so:
        every rank of the job stops at the same step (none is left waiting in the next
        collective); rank 0 names the ranks that differ."""
        ranks = self.agree(report is not None)
        if not ranks:
            return report

        me = rank_info().rank
        names = ", ".join(map(str, ranks))
        if report is not None:
            if me == 0:
                report.notes.append(f"ranks that differ at step {step}: {names}; every rank stopped there")
            return report
        return _StoppedWithOthers(step, self.against.index, names, me == 0)

    def record_safely(self, make_entries, source: str = AUTO) -> bool:
        """:meth:`record` of ``make_entries()``, for hooks and callbacks: a failure to
        digest or write logs a warning (once) and lets training go on; a step that could
        not be digested is recorded as one ``error`` entry, so later steps stay aligned
        with the reference. Only the stop at a divergence propagates."""
        if self.closed or self.report is not None or (source == AUTO and self.claimed):
            return False
        try:
            entries = make_entries()
        except Exception as exc:  # noqa: BLE001 - a digest never breaks the user's step
            self._warn(exc)
            entries = [("error", "not recorded", type(exc).__name__, 0)]
        try:
            return self.record(entries, source=source)
        except (OSError, ValueError) as exc:  # the file cannot be written (disk full, closed)
            self._warn(exc)
            return False

    def _warn(self, exc: Exception) -> None:
        if not self.failed:
            from .._log import logger

            logger.warning("fwd9m step digests: step %d not recorded: %s: %s", self.steps, type(exc).__name__, exc)
        self.failed += 1

    def _diverged(self, report: Any) -> None:
        self.report = report
        if self.writer is not None:
            self.writer.close({"completed": False, "stopped": "differs from the reference", "at_record": report.steps})
        text = report.render()
        if self.writer is not None:
            text += f"\nThis run's digests up to there: {shown(self.out or '')}"
        sys.stderr.write(f"fwd9m: {text}\n")  # one write: the ranks of a job share stderr
        sys.stderr.flush()
        if self.stop:
            raise DivergenceExit(report)

    def finish(self, status: int | None = 0) -> int | None:
        """Close the session at the end of the run; returns the exit status to use: 1
        when the run agreed so far but ended with fewer steps than the reference,
        else ``status``."""
        if self.closed or os.getpid() != self.pid:
            return status
        self.closed = True
        if self.report is not None:
            return 1 if status in (0, None) else status
        if self.steps == 0 and self.out and not self.quiet:
            print(
                "fwd9m: no training step was recorded (no optimizer.step() under PyTorch, and no "
                "step_digest() call or callback); the digest file holds no steps. For Keras, "
                "Lightning, HF Trainer, JAX or a custom loop add the callback or call "
                "fwd9m.debug.step_digest(...) (README: Step digests)",
                file=sys.stderr,
            )
            self._start()
        if self.writer is not None:
            self.writer.close({"completed": status in (0, None), "exit_status": status})
            if not self.writer.kept_old and not self.quiet:
                sys.stderr.write(f"fwd9m: step digests of {self.steps} step(s) written to {shown(self.writer.path)}\n")
            if self.writer.kept_old and not self.quiet:
                print(
                    f"fwd9m: the run did not complete (exit status {status}), so {self.writer.path} is "
                    f"left as it was; this run's digests are in {self.writer.partial}",
                    file=sys.stderr,
                )
        if self.against is None:
            return status
        report = self.against.finish()
        if report.length is not None:
            print(f"fwd9m: {report.render()}", file=sys.stderr, flush=True)
            return 1 if status in (0, None) else status
        if status in (0, None) and self.steps:
            print(f"fwd9m: {report.render()}", file=sys.stderr, flush=True)
        return status


class _StoppedWithOthers:
    """The stop of a rank that agrees with its reference at a step where another rank
    differs."""

    def __init__(self, step: int, steps: int, ranks: str, report_ranks: bool) -> None:
        self.step, self.steps, self.ranks, self.report_ranks = step, steps, ranks, report_ranks

    def render(self) -> str:
        text = f"stopped at step {self.step} with the other ranks: this rank agrees with its reference"
        return text + (f"; the ranks that differ there: {self.ranks}" if self.report_ranks else "")


_session: StepSession | None = None
_by_path: dict[str, StepSession] = {}
_started: list[StepSession] = []  #: sessions whose hooks :func:`start` installed


def from_env() -> StepSession | None:
    """The session ``fwd9m run --digests/--against`` configured, created on first use."""
    global _session
    if _session is None:
        out, against = os.environ.get(ENV_OUT) or None, os.environ.get(ENV_AGAINST) or None
        check_dir = os.environ.get(ENV_CHECK) or None
        if out or against:
            _session = StepSession(out, against, rank_independent=bool(os.environ.get(ENV_RANK_INDEPENDENT)))
        elif check_dir and os.path.isdir(check_dir):
            from ._gate import from_env as gate

            _session = StepSession(os.path.join(check_dir, f"steps-{os.getpid()}"), quiet=True, keep_old=False)
            _session.gate = gate(check_dir)
        if _session is not None:
            import atexit

            atexit.register(_session.finish)
    return _session


def start() -> StepSession | None:
    """In a run's process: the session of the environment (None without one), with
    PyTorch's optimizer hooks installed when torch is (or gets) imported; under ``fwd9m
    check`` (:data:`ENV_CHECK`) also Keras ``fit``'s step callback
    (:class:`~fwd9m.steps.keras.StepDigests`, after the user's callbacks) and the JAX
    step boundaries (:mod:`fwd9m.steps._jax`), when keras, jax and optax are imported."""

    session = from_env()
    if session is None or session in _started:
        return session
    _started.append(session)
    names = ["torch"]
    check_dir = os.environ.get(ENV_CHECK)
    if check_dir and not (os.environ.get(ENV_OUT) or os.environ.get(ENV_AGAINST)):
        names += ["keras", "jax", "optax"]
        sys.meta_path.insert(0, _Announce(check_dir, ["torch", "keras", "tensorflow", "jax"]))

    def on_import(name: str) -> None:
        try:
            _HOOKS[name](session)
        except Exception as exc:  # noqa: BLE001 - never break the user's import
            session._warn(exc)

    after_import(names, on_import)
    return session


#: the file a ``fwd9m check`` run's process creates in :data:`ENV_CHECK` when it starts
#: importing a framework whose training steps are recorded (``<prefix><pid>``): run 2
#: starts beside it then (:mod:`fwd9m.check._lockstep`)
FRAMEWORK_MARK = "framework-"


class _Announce:
    """A ``sys.meta_path`` finder that finds nothing: the first time one of ``names``
    starts importing, it creates :data:`FRAMEWORK_MARK` in ``folder`` and leaves."""

    def __init__(self, folder: str, names: list[str]) -> None:
        self.folder, self.names = folder, set(names)

    def find_spec(self, name, path=None, target=None):
        if name in self.names:
            try:
                sys.meta_path.remove(self)
                with open(os.path.join(self.folder, f"{FRAMEWORK_MARK}{os.getpid()}"), "w", encoding="utf-8") as f:
                    f.write(name)
            except (OSError, ValueError):  # never break the user's import
                pass
        return None


def _torch_hooks(session: StepSession) -> None:
    from ._torch import install

    install(session)


def _keras_hooks(session: StepSession) -> None:
    from ..keras._hooks import add_to_every_fit
    from .keras import StepDigests

    add_to_every_fit(StepDigests, session._warn)


def _jax_hooks(session: StepSession) -> None:
    from ._jax import install

    install(session)


def _optax_hooks(session: StepSession) -> None:
    from ._jax import install_optax

    install_optax(session)


_HOOKS = {"torch": _torch_hooks, "keras": _keras_hooks, "jax": _jax_hooks, "optax": _optax_hooks}


def for_path(path: str | os.PathLike[str] | None) -> StepSession | None:
    """The session writing ``path`` (created on first use and closed at exit), or, for
    None, the one from the environment."""
    if path is None:
        return from_env()
    key = os.path.abspath(os.fspath(path))
    s = _by_path.get(key)
    if s is None:
        s = _by_path[key] = StepSession(os.fspath(path))
        import atexit

        atexit.register(s.finish)
    return s


def require(path: str | os.PathLike[str] | None, what: str) -> StepSession:
    """:func:`for_path`, for a callback: a clear error when there is nowhere to write.

    Raises:
        ConfigurationError: no path and not under ``fwd9m run --digests/--against``.
    """
    session = for_path(path)
    if session is None:
        from ..errors import ConfigurationError

        raise ConfigurationError(
            f"{what} has nowhere to write: pass a path, {what}('run.steps'), or run "
            f"the script with: fwd9m run --digests run.steps train.py"
        )
    return session
