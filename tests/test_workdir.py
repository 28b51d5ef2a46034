"""The guard of the user's directory (``--cwd link``): what a restore replaces or
removes is kept, so an edit made while a run ran (by the user or by the run) is not lost."""

from __future__ import annotations

from fwd9m._runtime import workdir
from fwd9m._runtime.workdir import Guard


def _guarded(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "notes.txt").write_text("before")
    (user / "big.bin").write_bytes(b"x" * 10)
    return user, Guard.make(user, tmp_path / "backup" / "files")


def test_a_file_edited_during_a_run_is_put_back_and_the_edit_kept(tmp_path):
    user, guard = _guarded(tmp_path)
    (user / "notes.txt").write_text("edited while the run ran")
    (user / "new.py").write_text("a file the user saved meanwhile")
    guard.restore(["notes.txt", "new.py"])
    assert (user / "notes.txt").read_text() == "before" and not (user / "new.py").exists()
    kept = guard.displaced / "after-run-1"
    assert (kept / "notes.txt").read_text() == "edited while the run ran"
    assert (kept / "new.py").read_text() == "a file the user saved meanwhile"
    assert str(guard.displaced) in guard.displaced_note()


def test_a_deleted_file_comes_back_and_nothing_is_displaced(tmp_path):
    user, guard = _guarded(tmp_path)
    (user / "notes.txt").unlink()
    guard.restore(["notes.txt"])
    assert (user / "notes.txt").read_text() == "before"
    assert guard.displaced is None and guard.displaced_note() is None


def test_a_version_too_large_to_keep_is_left_in_place(tmp_path, monkeypatch):
    user, guard = _guarded(tmp_path)
    monkeypatch.setattr(workdir, "BACKUP_FILE_LIMIT", 16)
    (user / "big.bin").write_bytes(b"y" * 64)
    (user / "made.bin").write_bytes(b"z" * 64)
    guard.restore(["big.bin", "made.bin"])
    assert (user / "big.bin").read_bytes() == b"y" * 64 and (user / "made.bin").exists()
    assert guard.unprotected == {"big.bin", "made.bin"}
