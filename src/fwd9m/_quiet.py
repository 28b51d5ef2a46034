"""Silence native start-up logging: TensorFlow's C++ runtime (and Abseil before its log
is initialised) writes start-up lines such as the oneDNN and CPU-feature notices to file
descriptor 2, whatever ``TF_CPP_MIN_LOG_LEVEL`` says (the variable gates only TF's own
logger: ``LogMessage::~LogMessage`` in
https://github.com/tensorflow/tensorflow/blob/master/third_party/xla/xla/tsl/platform/default/logging.cc;
Abseil: https://github.com/abseil/abseil-cpp/pull/1718). Python-level errors are not
affected: they are raised as usual, and fwd9m reports them.
"""

from __future__ import annotations

import os
import sys

__all__ = ["QuietNativeStderr"]


class QuietNativeStderr:
    """Context manager: file descriptor 2 goes to ``os.devnull`` inside the block (for
    this process and any thread writing to it), and is restored on exit. Does nothing
    where descriptors cannot be duplicated."""

    def __enter__(self) -> QuietNativeStderr:
        try:
            sys.stderr.flush()
            self._saved: int | None = os.dup(2)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)
            os.close(null)
        except OSError:
            self._saved = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            os.dup2(self._saved, 2)
            os.close(self._saved)
