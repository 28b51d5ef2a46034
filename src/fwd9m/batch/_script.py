"""``fwd9m check|debug --vary batch SCRIPT``: the script runs in a child process
(:mod:`._child`) in a folder of its own that sees the user's directory copy-on-write,
as ``fwd9m check`` runs do, up to its model's first call; the child checks that call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, RunError


def run_child(
    target: str,
    args: Sequence[str],
    spec: dict[str, Any],
    cwd: str = "isolate",
    timeout: float | None = None,
    say: Callable[[str], None] = lambda m: None,
    child: str = "fwd9m.batch._child",
    env: dict[str, str] | None = None,
) -> dict:
    """Run the child (module ``child``: ``python -m CHILD OUT SPEC SCRIPT ARGS``) on
    ``target`` and return its result dict (with ``_log``: the end of the run's output).

    Raises:
        RunError: the script does not exist, timed out, or gave no result.
        ConfigurationError: the child could not check the call it found (bad input).
    """
    from .._runtime import isolation, lease
    from .._runtime.launch import resolve_target
    from .._runtime.process import kill_group, tail

    resolve_target(target, bool(spec.get("module")))
    lease.recover(say)  # the folders of fwd9m commands killed before (SIGKILL, OOM) removed
    root = Path(tempfile.mkdtemp(prefix="fwd9m-batch-"))
    lease.claim(root)  # its owner file: if fwd9m is killed, the next command stops the child and removes root
    env = {**(env or {}), lease.ENV_LEASE: str(root)}
    try:
        mode = isolation.choose(cwd, Path.cwd(), None if spec.get("module") else target, str(root), say)
        out, log = root / "result.json", root / "run.log"
        script = target if spec.get("module") else os.path.abspath(target)
        cmd = [sys.executable, "-m", child, str(out), json.dumps(spec), script, *args]
        guard, run_cwd = _folder(root, mode)
        if isinstance(mode, isolation.Isolation):
            cmd = isolation.wrap(cmd, mode, root / "run" / "cwd")
        else:
            cmd = isolation.wrap_plain(cmd, root / "run")
        say(f"running {target}" + (" up to its model's first call" if child.startswith("fwd9m.batch") else ""))
        with open(log, "wb") as sink:
            proc = subprocess.Popen(
                cmd, stdout=sink, stderr=sink, cwd=run_cwd, start_new_session=True, env={**os.environ, **env}
            )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise RunError(f"{target} did not reach a result within {timeout:g} s") from None
        except BaseException:
            kill_group(proc)
            raise
        finally:
            if guard is not None:
                guard.restore_all()
        return {**_result(out, tail(str(log)), proc.returncode), "_log": tail(str(log))}
    finally:
        lease.finish(root, None, False, say)  # what still runs of the child stopped, root removed


def _folder(root: Path, mode: Any):
    """The run's working folder (and, with ``--cwd link``, the guard that puts back the
    user's files the run wrote through its links)."""
    from .._runtime.workdir import Guard, prepare_cwd

    cwd = root / "run" / "cwd"
    if not isinstance(mode, str):
        cwd.mkdir(parents=True)
        return None, str(cwd)
    guard = Guard.make(Path.cwd(), root / "backup") if mode == "link" else None
    prepare_cwd(cwd, Path.cwd(), mode, own=root)
    return guard, str(cwd)


def _result(out: Path, log: str, status: int) -> dict:
    from ..compare import printable

    try:
        result = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        text = "\n".join(f"  | {line}" for line in printable(log).splitlines()[-15:])
        raise RunError(f"the script gave no result (exit status {status}); the end of its output:\n{text}") from None
    if "error" in result:
        raise ConfigurationError(f"batch check: {result['error']}")
    return result


def check_script(
    target: str,
    args: Sequence[str] = (),
    *,
    module: bool = False,
    entry: str | None = None,
    batch_dim: int | None = None,
    sizes: Sequence[int] | None = None,
    cwd: str = "isolate",
    timeout: float | None = None,
    say: Callable[[str], None] = lambda m: None,
):
    """``fwd9m check --vary batch``: run ``target`` up to its model's first call and
    check that call for batch invariance (:func:`fwd9m.batch.check_invariance`)."""
    from ._check import BatchResult

    spec = {"mode": "check", "module": module, "entry": entry, "batch_dim": batch_dim, "sizes": _sizes(sizes)}
    return BatchResult.from_dict(run_child(target, args, spec, cwd, timeout, say))


def debug_script(
    target: str,
    args: Sequence[str] = (),
    *,
    module: bool = False,
    entry: str | None = None,
    batch_dim: int | None = None,
    sizes: Sequence[int] | None = None,
    cwd: str = "isolate",
    timeout: float | None = None,
    say: Callable[[str], None] = lambda m: None,
):
    """``fwd9m debug --vary batch``: the first op of the script's model whose output rows
    depend on the batch (:func:`fwd9m.batch.debug_invariance`)."""
    from ._debug import BatchDebugResult

    spec = {"mode": "debug", "module": module, "entry": entry, "batch_dim": batch_dim, "sizes": _sizes(sizes)}
    return BatchDebugResult.from_dict(run_child(target, args, spec, cwd, timeout, say))


def _sizes(sizes: Sequence[int] | None) -> list[int] | None:
    if sizes is None:
        return None
    out = [int(s) for s in sizes]
    if not out or min(out) < 1:
        raise ConfigurationError(f"batch sizes must be positive integers, got {sizes}")
    return out
