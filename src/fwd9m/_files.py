"""Reading and writing user-named files safely, below every package that does: a path
shown in a message (quoted, control characters escaped), the one check before opening
(:func:`require_regular_file`: a named pipe or a device is refused),
:func:`open_regular_file` (opens without blocking, checks the opened file again),
:func:`read_regular_file` (a whole file of at most a given size, so a reader never hangs
or fills memory), and the checks before writing (:func:`check_output_path`,
:func:`refuse_overwrite`). Moved here from :mod:`fwd9m._runtime.launch`, which still
exports them, so that ``compare``, ``environment`` and ``rng`` use them without reaching
up into the process plumbing.
"""

from __future__ import annotations

import os
import stat

from .errors import FileFormatError

__all__ = [
    "shown",
    "require_regular_file",
    "open_regular_file",
    "read_regular_file",
    "refuse_overwrite",
    "starts_with",
    "check_output_path",
]


def shown(path: str | os.PathLike[str]) -> str:
    """``path`` as a message shows it: quoted when it is empty or has spaces around it,
    which a plain print hides (``fwd9m run "$SCRIPT"`` with an unset variable), and with
    control characters escaped (a newline or an escape sequence in a file name would
    forge a line of the message or act on the terminal)."""
    from ._escape import escape_control

    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    return repr(text) if not text or text != text.strip() else escape_control(text)


_KINDS = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def require_regular_file(
    path: str | os.PathLike[str], what: str, hint: str, error: type[Exception] = FileFormatError
) -> None:
    """Check, without opening it, that ``path`` is a readable regular file (symbolic
    links followed). A named pipe blocks until something writes to it, and a device
    such as ``/dev/zero`` never ends, so fwd9m refuses them before reading.

    Args:
        what: what the file should be, for the message ("trace", "fingerprint").
        hint: the fix to paste, appended to the message.
        error: the :class:`~fwd9m.errors.Fwd9mError` subclass to raise.

    Raises:
        error: ``path`` is missing, a directory, not a regular file, or not readable.
    """
    name = shown(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise error(f"{what} not found: {name} (no such file); {hint}") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise error(f"cannot read {what} {name}: {getattr(exc, 'strerror', None) or exc}; {hint}") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{name} is a directory, not a {what} file; {hint}")
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a regular file")
        raise error(
            f"{name} is {kind}, not a regular {what} file (reading a pipe blocks until "
            f"something writes to it; a device may never end); {hint}"
        )
    if not os.access(path, os.R_OK):
        raise error(
            f"cannot read {what} {name}: permission denied; give yourself read "
            f"access (chmod u+r {name}) or run as its owner"
        )


def open_regular_file(path: str | os.PathLike[str], what: str, hint: str, error: type[Exception] = FileFormatError):
    """:func:`require_regular_file`, then open ``path`` for binary reading. The open
    does not block (``O_NONBLOCK``: opening a named pipe to read otherwise waits for a
    writer), and the opened file is checked again with ``fstat``, so a path replaced by
    a pipe or device between the check and the open is refused too.

    Returns:
        a binary file object (buffered), positioned at the start.

    Raises:
        error: as :func:`require_regular_file`, or the file cannot be opened.
    """
    require_regular_file(path, what, hint, error)
    name = shown(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:
        raise error(f"cannot read {what} {name}: {getattr(exc, 'strerror', None) or exc}; {hint}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error(f"{name} is not a regular {what} file (it changed while fwd9m opened it); {hint}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(
    path: str | os.PathLike[str], what: str, hint: str, max_bytes: int, error: type[Exception] = FileFormatError
) -> bytes:
    """The whole content of ``path``, a regular file of at most ``max_bytes`` bytes
    (:func:`open_regular_file`). A larger file is refused before it is read, and never
    more than ``max_bytes + 1`` bytes are read (a file that grows while read).

    Raises:
        error: as :func:`open_regular_file`, or the file is larger than ``max_bytes``.
    """
    with open_regular_file(path, what, hint, error) as f:
        size = os.fstat(f.fileno()).st_size
        try:
            data = f.read(max_bytes + 1) if size <= max_bytes else b""
        except OSError as exc:
            raise error(f"cannot read {what} {shown(path)}: {exc.strerror or exc}; {hint}") from None
    if size > max_bytes or len(data) > max_bytes:
        size = max(size, len(data))
        raise error(
            f"{shown(path)} is {_size(size)}, more than any {what} file fwd9m writes "
            f"({_size(max_bytes)} at most), so it is another file; {hint}"
        )
    return data


def starts_with(path: str | os.PathLike[str], marks: tuple[bytes, ...], within: int = 256) -> bool:
    """Whether the regular file ``path`` is empty or one of ``marks`` occurs in its first
    ``within`` bytes: how a writer recognises a file it wrote before (a trace's
    signature, an HTML report's title). Never blocks: a pipe or device is not one."""
    try:
        with open_regular_file(path, "file", "") as f:
            head = f.read(within)
    except Exception:  # noqa: BLE001 - unreadable: not recognisably ours
        return False
    return not head or any(m in head for m in marks)


def check_output_path(out: str, option: str = "-o", example: str = "run.trace") -> None:
    """Refuse, before any run, an output path that cannot be written as a file: a
    directory, a named pipe (opening it to write blocks until a reader comes) or a
    device, or one in a missing folder."""
    from .errors import ConfigurationError

    try:
        mode: int | None = os.stat(out).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise ConfigurationError(f"{option} {shown(out)} is {kind}; name the file to write, e.g. {option} {example}")
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise ConfigurationError(
            f"{option} {shown(out)}: the folder {folder} does not exist; create it first (mkdir -p {folder})"
        )


def refuse_overwrite(
    path: str | os.PathLike[str],
    option: str,
    *,
    inputs=(),
    ours=None,
    force: bool = False,
    what: str = "a file",
    example: str = "out",
    force_fix: str = "add --force to replace it",
) -> None:
    """Before writing ``path`` (given with ``option``): refuse, whatever ``force`` says,
    when it is one of ``inputs`` (the same file under any name: writing it would destroy
    what is being read); refuse an existing file that ``ours(path)`` does not recognise
    as one fwd9m wrote, unless ``force`` (``--force``; ``force_fix`` says how to ask).

    Raises:
        ConfigurationError: what the file is, and the fix.
    """
    from .errors import ConfigurationError

    name = shown(path)
    if not os.path.lexists(path):
        return
    for inp in inputs:
        try:
            same = inp is not None and os.path.samefile(path, inp)
        except (OSError, ValueError):
            same = False
        if same:
            raise ConfigurationError(
                f"{option} {name} is also an input ({shown(inp)}); writing it would "
                f"destroy it: name another file, e.g. {option} {example}"
            )
    if not force and not (ours is not None and os.path.isfile(path) and ours(path)):
        raise ConfigurationError(
            f"{option} {name} exists and is not {what} fwd9m wrote; fwd9m "
            f"does not overwrite it: name another file, or {force_fix}"
        )


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n} bytes"
