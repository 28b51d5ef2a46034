"""Child side of ``fwd9m check``: keep the script's entry function's frame, so that its
local variables can be captured at exit.

A training written as ``def main(): params = init(); ...; main()`` holds its model
(a JAX pytree, raw tensors) only in ``main``'s locals, which are gone when the script
ends. A thread of this module (a plain ``_thread``, not listed by ``threading``) looks at
every thread's stack a few times a second and keeps a reference to the outermost frame
that runs a function of the script's own file(s); once that function returns, the frame
object still holds its locals (CPython keeps a finished frame's locals in the frame
object while a reference to it exists). :func:`kept` gives them at exit; :func:`release`
lets them go right after the capture, so the objects they hold are freed then (a
destructor runs after the capture, not at the function's return: the only change to the
program, and one after it is over).

A function that returns between two looks (5 ms apart until one is seen, 0.2 s after)
may be missed: the capture then has
no locals and says so. A function seen in two calls (a step called in a loop) or in two
threads at once (a thread pool's work function) is no entry function: which call the last
look saw is timing, so its locals are not kept; in a thread other than the script's, only
a thread's own target (``Thread(target=train)``) is looked at.
"""

from __future__ import annotations

import _thread
import sys
import time
from typing import Any

#: seconds between looks: ``FIRST`` until a function of the script has been seen (so that
#: an entry function that runs for a fraction of a second is caught; a look costs some
#: microseconds), ``INTERVAL`` after
FIRST, INTERVAL = 0.005, 0.2

_state: dict[str, Any] = {
    "files": set(),
    "frames": {},
    "repeated": set(),
    "main": None,  # the thread that runs the script (the first to call watch)
    "running": False,
    "stop": False,
}


def watch(filename: str) -> None:
    """Keep the outermost frame of each thread that runs code of ``filename`` (the script,
    from the ``exec`` audit event); starts the watcher thread once."""
    _state["files"].add(filename)
    if _state["main"] is None:
        _state["main"] = _thread.get_ident()
    if not _state["running"]:
        _state["running"] = True
        try:
            _thread.start_new_thread(_loop, ())
        except RuntimeError:  # no thread to spare: the capture goes without locals
            _state["running"] = False


def _loop() -> None:
    me = _thread.get_ident()
    while not _state["stop"]:
        time.sleep(INTERVAL if _state["frames"] or _state["repeated"] else FIRST)
        try:
            look(skip=me)
        except Exception:  # noqa: BLE001 - never break the user's program
            pass


def look(skip: int | None = None) -> None:
    """One look at every thread's stack (also called once more right before the capture)."""
    files = _state["files"]
    for ident, frame in sys._current_frames().items():
        if ident == skip:
            continue
        outer = None
        while frame is not None:
            code = frame.f_code
            if code.co_filename in files and not code.co_name.startswith("<"):  # not <module>, <listcomp>
                outer = frame
            frame = frame.f_back
        if outer is not None and (ident == _state["main"] or _thread_target(outer)):
            _keep(ident, outer)
        del outer, frame


def _thread_target(frame: Any) -> bool:
    """Whether ``frame`` runs as a thread's own target (``Thread(target=train)``), called
    by ``Thread.run``; a thread pool's work (``concurrent.futures``' worker calls it) is
    not: which work item the last look saw is timing."""
    caller = frame.f_back
    return caller is not None and caller.f_code.co_name == "run" and caller.f_code.co_filename.endswith("threading.py")


def _keep(ident: int, frame: Any) -> None:
    """Keep ``frame``, the outermost frame of the script's code in thread ``ident``,
    unless its function is no entry function: one called again (another frame for it in
    this thread: a step function called in a loop) or running in another thread too (a
    thread pool's work function). Its locals at exit would be those of whichever call the
    last look happened to see, which differs from run to run; such a function is dropped
    for good."""
    frames, repeated = _state["frames"], _state["repeated"]
    code = frame.f_code
    if code in repeated:
        return
    seen = [key for key in list(frames) if key[1] is code]  # a copy: the main thread may look too
    if any(key[0] != ident or frames.get(key, frame) is not frame for key in seen):
        repeated.add(code)
        for key in seen:
            frames.pop(key, None)
        return
    frames[(ident, code)] = frame


def kept() -> list[tuple[str, dict[str, Any]]]:
    """``(function name, locals)`` of the frames kept, in the order first seen; a name
    twice (two threads) gets ``#2``."""
    out, used = [], {}
    for (_, code), frame in list(_state["frames"].items()):
        try:
            local = dict(frame.f_locals)
        except Exception:  # noqa: BLE001
            continue
        used[code.co_name] = used.get(code.co_name, 0) + 1
        name = code.co_name if used[code.co_name] == 1 else f"{code.co_name}#{used[code.co_name]}"
        out.append((name, local))
    return out


def release() -> None:
    """Stop looking and drop the frames kept."""
    _state["stop"] = True
    _state["frames"].clear()
    _state["repeated"].clear()
