"""Run a command with some directories seen copy-on-write: ``python -I _isolate_exec.py
SPEC -- command ...``. Run as a file, not imported: it uses the standard library only,
so that it starts fast and nothing of fwd9m or of the user's environment runs before
the command.

In a mount namespace of its own (and, when the process is not root, a user namespace
mapping the user to itself: unprivileged overlayfs, Linux 5.11 and later) it mounts an
overlay over each directory of the SPEC (JSON: ``{"cwd": ..., "layers": [{"lower",
"upper", "work"}, ...]}``, outer directories first), so that every write the command
makes there, under any name, lands in the layer's ``upper`` folder and the directory
itself is never changed. Then it changes into ``cwd`` (after the mounts, so that the
working directory is the overlay) and becomes the command. The mounts end with the last
process of the namespace; nothing needs to be unmounted. The command is killed when its
parent (fwd9m) dies, even by SIGKILL (``PR_SET_PDEATHSIG``).

Exit status 125 with one line on stderr when the isolation cannot be set up.
"""

import ctypes
import json
import os
import signal
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
FAILED = 125


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(ret, what):
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _escape(path):
    """An overlayfs mount option value: backslash before ``\\``, ``,`` and ``:``."""
    return "".join("\\" + c if c in "\\,:" else c for c in path)


def _namespaces(libc):
    """A mount namespace (root), else a user and mount namespace; True in the latter."""
    if os.geteuid() == 0 and libc.unshare(CLONE_NEWNS) == 0:
        return False
    uid, gid = os.getuid(), os.getgid()
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(user, mount namespaces)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    return True


def isolate(spec):
    libc = _libc()
    parent = os.getppid()
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # fwd9m died before the line above
        os._exit(FAILED)
    if not spec["layers"]:  # --cwd link or empty: only dying with fwd9m
        return
    userns = _namespaces(libc)
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making mounts private")
    # each lower directory as it is now, before any overlay hides a mount under it
    fds = [os.open(layer["lower"], os.O_PATH | os.O_DIRECTORY) for layer in spec["layers"]]
    for layer, fd in zip(spec["layers"], fds):
        opts = (
            f"lowerdir={_escape(f'/proc/self/fd/{fd}')},upperdir={_escape(layer['upper'])},"
            f"workdir={_escape(layer['work'])}" + (",userxattr" if userns else "")
        )
        ret = libc.mount(b"overlay", os.fsencode(layer["lower"]), b"overlay", 0, opts.encode())
        _check(ret, f"mounting an overlay on {layer['lower']}")
    for fd in fds:
        os.close(fd)
    os.chdir(spec["cwd"])
    # what the run wrote in its working directory, for fwd9m's own code in it (check --resume)
    os.environ["FWD9M_RUN_WRITES"] = spec["writes"]


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: _isolate_exec.py SPEC -- command ...\n")
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            spec = json.load(f)
        isolate(spec)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"fwd9m isolation failed: {exc}\n")
        return FAILED
    try:
        os.execvp(argv[3], argv[3:])
    except OSError as exc:
        sys.stderr.write(f"{argv[3]}: {exc.strerror}\n")
        return 127
    return FAILED  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
