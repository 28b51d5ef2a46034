"""The final-state capture writes only where fwd9m check names (FWD9M_CHECK_CAPTURE):
run without it, the runner leaves the script's folder as it was (it once wrote
capture-<pid>.json/.npz into the working directory)."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = "import numpy as np\nw = np.arange(3.0)\nprint(w.sum())\n"


def _run(folder, env):
    return subprocess.run(
        [sys.executable, "-m", "fwd9m._runtime.capture", "train.py"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_a_capture_folder_nothing_is_written_in_the_working_directory(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "FWD9M_CHECK_CAPTURE"}
    r = _run(tmp_path, env)
    assert r.returncode == 0 and r.stdout.strip() == "3.0", r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_with_a_capture_folder_the_state_goes_there(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    out = tmp_path / "out"
    out.mkdir()
    r = _run(tmp_path, {**os.environ, "FWD9M_CHECK_CAPTURE": str(out)})
    assert r.returncode == 0, r.stderr
    assert sorted(p.suffix for p in out.iterdir()) == [".json", ".npz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "train.py"]
