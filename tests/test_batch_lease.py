"""The temporary folder of ``fwd9m check --vary batch`` (and ``--cost``, which runs the
same child) is leased: killed with SIGKILL, fwd9m leaves a folder that the next command's
recovery removes, with nothing of its run left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

if not os.path.isdir("/proc"):
    pytest.skip("needs /proc", allow_module_level=True)


def _leased(root: Path) -> list[int]:
    """The processes whose environment carries ``root``'s lease."""
    from fwd9m._runtime.lease import ENV_LEASE

    token = f"{ENV_LEASE}={root}\0".encode()
    pids = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if name.isdigit() and token in f.read() + b"\0":
                    pids.append(int(name))
        except OSError:
            continue
    return pids


def _wait(cond, seconds: float = 60.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.1)
    return cond()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_vary_batch_folder_is_recovered_after_sigkill(tmp_path, monkeypatch):
    from fwd9m._runtime import lease

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp_path / "sleeper.py").write_text("import time\n\ntime.sleep(120)\n")
    env = {**os.environ, "TMPDIR": str(tmp)}
    cmd = [sys.executable, "-m", "fwd9m", "check", "-q", "--vary", "batch", "sleeper.py"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        roots = _wait(lambda: [p for p in tmp.glob("fwd9m-batch-*") if (p / lease.OWNER).exists()])
        assert roots, "no leased folder appeared"
        assert _wait(lambda: _leased(roots[0])), "the child does not carry the lease"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    pids = _leased(roots[0])
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr("tempfile.tempdir", None)
    lease.recover(lambda m: None)
    assert not roots[0].exists()
    assert _wait(lambda: not any(_alive(p) for p in pids), 10), "a process of the run still runs"


def test_remove_never_chmods_through_a_link(tmp_path):
    """The retry of :func:`fwd9m._runtime.lease.remove` on a link in fwd9m's folder: the
    link goes, its target (the user's file) keeps its mode."""
    from fwd9m._runtime import lease

    target = tmp_path / "users_file"
    target.write_text("x")
    target.chmod(0o400)
    root = tmp_path / "fwd9m-x"
    root.mkdir()
    (root / "link").symlink_to(target)
    lease._retry(os.unlink, str(root / "link"), None)
    assert not (root / "link").is_symlink()
    assert target.stat().st_mode & 0o777 == 0o400
    (root / "dir").symlink_to(tmp_path, target_is_directory=True)
    lease._retry(lambda p: None, str(root / "dir" / "users_file"), None)  # a parent that is a link
    assert target.stat().st_mode & 0o777 == 0o400
