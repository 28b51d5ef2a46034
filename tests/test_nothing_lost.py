"""Nothing lost, whatever happens: a real project folder (small files, a symlinked
``outputs/`` on "another disk", a 100 MB checkpoint the script resumes from and
rewrites, a log open for append, a new folder), ``fwd9m check`` and ``fwd9m debug``
interrupted at each phase with SIGINT, SIGTERM and SIGKILL (then a second fwd9m
command): afterwards the folder is byte-identical, no process of the runs is left and
fwd9m's temporary directory is empty."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fwd9m._runtime import isolation

pytestmark = pytest.mark.slow

SCRIPT = """\
import os, sys, time
from pathlib import Path
marks = Path(sys.argv[1])
n = len(list(marks.glob("start-*")))
(marks / f"start-{n}-{os.getpid()}").write_text("")
ckpt = Path("checkpoints/last.pt")
step = int(ckpt.read_bytes()[:8] or b"0") if ckpt.exists() else 0
print("resumed at", step, flush=True)
with open("log.txt", "a") as f:
    f.write(f"run at step {step}\\n")
Path("out/prev.txt").write_text("the run's own text\\n")
Path("outputs/result.txt").write_text("42\\n")
os.makedirs("new_folder/sub", exist_ok=True)
Path("new_folder/sub/x.txt").write_text("x\\n")
ckpt.write_bytes(b"%08d" % (step + 1) + bytes(100 << 20))
(marks / f"wrote-{n}").write_text("")
time.sleep(float(sys.argv[2]))
print("done", flush=True)
"""


def _sigint_default() -> None:
    """In the child: Ctrl-C's default action (a background job of a non-interactive shell
    starts with SIGINT ignored, and so would fwd9m: the SIGINT test would hang)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _project(tmp_path: Path) -> tuple[Path, list[Path]]:
    proj, disk = tmp_path / "proj", tmp_path / "disk" / "outputs"
    for d in (proj / "out", proj / "checkpoints", disk, tmp_path / "marks", tmp_path / "tmp"):
        d.mkdir(parents=True)
    (proj / "train.py").write_text(SCRIPT)
    (proj / "out" / "prev.txt").write_text("my previous results\n")
    (proj / "log.txt").write_text("my log\n")
    (proj / "checkpoints" / "last.pt").write_bytes(b"%08d" % 7 + bytes(100 << 20))
    (disk / "result.txt").write_text("my result on the other disk\n")
    (proj / "outputs").symlink_to(disk)
    return proj, [proj, disk]


def _manifest(roots: list[Path]) -> dict[str, tuple]:
    out = {}
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            for name in dirs + files:
                p = Path(dirpath, name)
                st = p.lstat()
                digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else ""
                out[str(p)] = (
                    st.st_mode,
                    st.st_size if not p.is_dir() else 0,
                    digest,
                    os.readlink(p) if p.is_symlink() else "",
                )
    return out


def _started(tmp_path: Path) -> list[int]:
    return [int(p.name.split("-")[2]) for p in (tmp_path / "marks").glob("start-*")]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _fwd9m(tmp_path: Path, proj: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    return subprocess.Popen(
        [sys.executable, "-m", "fwd9m", *args],
        cwd=proj,
        env=env,
        stdout=open(proj / "report.txt", "w"),  # its own report, redirected into the folder
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_sigint_default,  # as from a terminal, also when pytest runs as a background job
    )


def _wait_for(cond, timeout: float = 60.0) -> None:
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError("the phase was never reached")
        time.sleep(0.05)


PHASES = {
    "before the runs": lambda m: True,
    "during run 1": lambda m: (m / "wrote-0").exists(),
    "during run 2": lambda m: (m / "wrote-1").exists(),
}


def _after(tmp_path: Path, proj: Path, roots: list[Path], before: dict) -> None:
    for pid in _started(tmp_path):
        _wait_for(lambda pid=pid: not _alive(pid), 15)
    after = _manifest(roots)
    after.pop(str(proj / "report.txt"))
    assert after == before, sorted(set(after.items()) ^ set(before.items()))[:6]
    # nothing of fwd9m's (a framework's own cache there, torchinductor_<user>, is the script's)
    assert [p for p in (tmp_path / "tmp").iterdir() if p.name.startswith("fwd9m")] == []


@pytest.mark.parametrize("mode", ["isolate", "link"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
@pytest.mark.parametrize("phase", list(PHASES))
def test_check_interrupted_at_any_phase_loses_nothing(tmp_path, mode, sig, phase):
    proj, roots = _project(tmp_path)
    if mode == "link":  # the guard copies at most 64 MiB a file: this checkpoint is not rewritten there
        (proj / "train.py").write_text(SCRIPT.replace('ckpt.write_bytes(b"%08d" % (step + 1) + bytes(100 << 20))', ""))
    before = _manifest(roots)  # once, after the script is written (it hashes the 100 MB checkpoint)
    before.pop(str(proj / "report.txt"), None)
    p = _fwd9m(tmp_path, proj, "check", "--cwd", mode, "--no-hashseed-check", "train.py", str(tmp_path / "marks"), "3")
    _wait_for(lambda: PHASES[phase](tmp_path / "marks") or p.poll() is not None)
    time.sleep(0.2)
    os.kill(p.pid, sig)
    p.wait(timeout=60)
    if sig == signal.SIGKILL:  # the next fwd9m command recovers
        q = _fwd9m(tmp_path, proj, "check", "--cwd", mode, "--", "true")
        q.wait(timeout=60)
        report = (proj / "report.txt").read_text()
        if mode == "link" and phase != "before the runs":  # the runs wrote into the folder itself
            assert "recovery: a fwd9m command was killed before it finished; put back" in report, report
    _after(tmp_path, proj, roots, before)


def test_a_whole_check_keeps_its_report_and_the_files(tmp_path):
    """Not interrupted: the verdict rests on the runs' own files (run 2 did not resume from
    run 1's checkpoint; the symlinked folder's result was compared); the report redirected
    into the folder is whole."""
    proj, roots = _project(tmp_path)
    before = _manifest(roots)
    before.pop(str(proj / "report.txt"), None)
    p = _fwd9m(tmp_path, proj, "check", "--no-hashseed-check", "train.py", str(tmp_path / "marks"), "0")
    assert p.wait(timeout=300) == 0, (proj / "report.txt").read_text()
    report = (proj / "report.txt").read_text()
    assert "REPRODUCIBLE: 2 runs of train.py" in report, report
    iso = isolation.plan(proj, None, str(tmp_path / "tmp"))[0]
    if iso is not None and not isolation.probe(iso, tmp_path / "probe"):
        assert "copy-on-write" in report
    _after(tmp_path, proj, roots, before)


TORCH_SCRIPT = """\
import os, sys, time
from pathlib import Path
import torch
marks = Path(sys.argv[1])
n = len(list(marks.glob("start-*")))
(marks / f"start-{n}-{os.getpid()}").write_text("")
Path("out/prev.txt").write_text("the run's own text\\n")
Path("outputs/result.txt").write_text("42\\n")
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
os.makedirs("checkpoints", exist_ok=True)
for step in range(40):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    if step == 2:
        torch.save(model.state_dict(), "checkpoints/step.pt")
        (marks / f"wrote-{n}").write_text("")
    time.sleep(0.1)
print("loss", loss.item())
"""


@pytest.mark.parametrize(
    "command", [("debug", "--no-hashseed-check"), ("check", "--resume", "--interrupt-after", "30")]
)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_debug_and_resume_interrupted_during_a_run_lose_nothing(tmp_path, command, sig):
    pytest.importorskip("torch")
    proj, roots = _project(tmp_path)
    (proj / "train.py").write_text(TORCH_SCRIPT)
    before = _manifest(roots)
    p = _fwd9m(tmp_path, proj, *command, "train.py", str(tmp_path / "marks"))
    _wait_for(lambda: (tmp_path / "marks" / "wrote-0").exists() or p.poll() is not None, 120)
    time.sleep(0.2)
    os.kill(p.pid, sig)
    p.wait(timeout=60)
    if sig == signal.SIGKILL:  # the next fwd9m command recovers
        _fwd9m(tmp_path, proj, "check", "--", "true").wait(timeout=60)
    _after(tmp_path, proj, roots, before)


FIX_SCRIPT = """\
import os, random, sys, time
from pathlib import Path
marks = Path(sys.argv[1])
n = len(list(marks.glob("start-*")))
(marks / f"start-{n}-{os.getpid()}").write_text("")
x = random.random()  # unseeded: fwd9m fix patches it
Path("out/prev.txt").write_text(f"{x}\\n")
Path("outputs/result.txt").write_text(f"{x}\\n")
with open("log.txt", "a") as f:
    f.write(f"{x}\\n")
Path("checkpoints/last.pt").write_bytes(b"%08d" % n + bytes(100 << 20))
if "enable_" "determinism(" in Path(__file__).read_text():  # the patch, not this line
    (marks / "patched").write_text("")
    time.sleep(30)
print(x)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_fix_interrupted_while_checking_its_patched_copy_loses_nothing(tmp_path, sig):
    """The patched copy is a folder of links to the user's entries: a run of it writes
    through them only into its isolation, and an interruption leaves the folder as it was."""
    proj, roots = _project(tmp_path)
    (proj / "train.py").write_text(FIX_SCRIPT)
    before = _manifest(roots)
    p = _fwd9m(tmp_path, proj, "fix", "--timeout", "120", "train.py", str(tmp_path / "marks"))
    _wait_for(lambda: (tmp_path / "marks" / "patched").exists() or p.poll() is not None, 240)
    assert p.poll() is None, (proj / "report.txt").read_text()
    os.kill(p.pid, sig)
    p.wait(timeout=60)
    if sig == signal.SIGKILL:  # the next fwd9m command recovers
        _fwd9m(tmp_path, proj, "check", "--", "true").wait(timeout=60)
    _after(tmp_path, proj, roots, before)
