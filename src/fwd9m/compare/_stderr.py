"""A run's standard error as it is compared: results logged with ``logging`` or absl
are there (their default handlers write to stderr), and so is what a framework's C++
core logs at start-up, stamped with the clock and the thread. :func:`for_comparison`
writes a copy without the latter (each left-out line counted, by kind, so that the
report lists it) and with absl's clock and thread masked in the lines it keeps."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["for_comparison", "LEFT_OUT"]

#: a line of C++ logging (glog/absl format, as TensorFlow, XLA, JAX and PyTorch's c10
#: write it): ``I0000 00:00:1733.. 12345 port.cc:153] ...``, ``[W1202 09:42:30.1 socket.cpp:752] ...``
_CXX_LOG = re.compile(rb"^\[?[IWEF]\d{4} \d{2}:\d{2}:\d+\.\d+\s+(?:\d+\s+)?[\w./-]+\.(?:cc|cpp|cxx|c|h|hpp|cu):\d+\]")
#: absl's Python logging (Flax examples, research code): the clock and the thread id
#: are masked, the message is compared: ``I1202 09:42:30.123456 140234 train.py:12] loss=0.5``
_ABSL_PY = re.compile(rb"^([IWEF])\d{4} \d{2}:\d{2}:\d+\.\d+\s+\d+\s+(?=[\w./<>-]+:\d+\] )")
#: whole lines a framework prints at start-up, the same text in every run but for what
#: the C++ line before them said
_STARTUP = (
    re.compile(rb"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"),
    re.compile(rb"^To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler flags\.$"),
    re.compile(rb"^fwd9m( [\w -]+)?: "),  # fwd9m's own messages in the run (step digests), not the script's
)
#: the kinds of left-out lines, as the report names them
LEFT_OUT = {
    "cxx": "C++ log line of a framework (TensorFlow, XLA, JAX, PyTorch c10: clock and thread id)",
    "startup": "framework start-up notice or fwd9m's own message",
}


def for_comparison(stderr: Path, out: Path) -> tuple[Path, dict[str, tuple[int, str]]]:
    """Write ``stderr`` to ``out`` without the lines of :data:`LEFT_OUT` and with absl's
    clock and thread masked; returns ``out`` and, by kind, how many lines were left out
    and the first of them. Line by line: bounded memory."""
    left = {k: (0, "") for k in LEFT_OUT}
    try:
        src = open(stderr, "rb")
    except OSError:
        out.write_bytes(b"")
        return out, left
    with src, open(out, "wb") as dst:
        for line in src:
            body = line.rstrip(b"\r\n")
            kind = "cxx" if _CXX_LOG.match(body) else "startup" if any(p.match(body) for p in _STARTUP) else None
            if kind is not None:
                n, first = left[kind]
                left[kind] = (n + 1, first or body.decode("utf-8", "replace"))
                continue
            dst.write(_ABSL_PY.sub(rb"\1<time> <thread> ", line, count=1))
    return out, left
