"""The guard of the user's directory (``--cwd link``, where runs cannot be isolated):
what a run changed, created or deleted is put back; its journal lets a later command
put the files back after fwd9m was killed; nothing is left behind."""

from __future__ import annotations

import json

from fwd9m._runtime import workdir
from fwd9m._runtime.workdir import JOURNAL, Guard, recover_journal


def _guarded(tmp_path):
    user = tmp_path / "user"
    (user / "out").mkdir(parents=True)
    (user / "notes.txt").write_text("before")
    (user / "big.bin").write_bytes(b"x" * 10)
    (user / "out" / "prev.txt").write_text("prev")
    (user / "link").symlink_to("notes.txt")
    return user, Guard.make(user, tmp_path / "backup" / "files")


def test_changed_created_and_deleted_entries_are_put_back_without_leftovers(tmp_path):
    user, guard = _guarded(tmp_path)
    (user / "notes.txt").write_text("changed by a run")
    (user / "out" / "prev.txt").unlink()
    (user / "out").rmdir()
    (user / "new").mkdir()
    (user / "new" / "ckpt.pt").write_bytes(b"run 1's checkpoint")
    (user / "link").unlink()
    assert guard.restore_all() == []
    assert (user / "notes.txt").read_text() == "before"
    assert (user / "out" / "prev.txt").read_text() == "prev"
    assert not (user / "new").exists()
    assert (user / "link").is_symlink() and str((user / "link").readlink()) == "notes.txt"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup", "user"]  # no displaced copies


def test_a_source_file_changed_meanwhile_is_put_back_and_its_new_text_kept(tmp_path, monkeypatch):
    """A source file that changed while the runs ran (a run rewrote config.toml or
    results.md, or you edited train.py) is put back, and its new text is kept in the
    cache folder: your file as it was, and your edit, if it was one, not lost (it was left
    changed, so a run's rewrite of it stayed for good)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    user, guard = _guarded(tmp_path)
    (user / "train.py").write_text("print(1)\n")
    guard2 = Guard.make(user, tmp_path / "backup2" / "files")
    (user / "train.py").write_text("print(2)  # the user's edit\n")
    assert guard2.restore_all() == []
    assert (user / "train.py").read_text() == "print(1)\n"
    assert guard2.kept["train.py"].read_text() == "print(2)  # the user's edit\n"
    assert guard2.kept_dir is not None and guard2.kept_dir.is_relative_to(tmp_path / "cache" / "fwd9m")
    del guard


def test_a_file_too_large_to_copy_is_named_when_a_run_changed_it(tmp_path, monkeypatch):
    monkeypatch.setattr(workdir, "BACKUP_FILE_LIMIT", 8)
    user, guard = _guarded(tmp_path)
    (user / "big.bin").write_bytes(b"y" * 64)
    (user / "made.bin").write_bytes(b"z" * 64)
    assert guard.restore_all() == ["big.bin"]
    assert not (user / "made.bin").exists()  # created by the run: removed whatever its size


def test_the_journal_puts_files_back_after_fwd9m_was_killed(tmp_path):
    user, guard = _guarded(tmp_path)
    (user / "notes.txt").write_text("changed by a run")
    (user / "made.txt").write_text("new")
    done, left = recover_journal(tmp_path / "backup")  # a later command, from the journal alone
    assert (user / "notes.txt").read_text() == "before" and not (user / "made.txt").exists()
    assert "notes.txt" in done and "made.txt" in done and left == []


def test_a_crafted_journal_touches_nothing_outside_its_directory(tmp_path):
    user, guard = _guarded(tmp_path)
    outside = tmp_path / "victim.txt"
    outside.write_text("keep me")
    data = json.loads((tmp_path / "backup" / JOURNAL).read_text())
    data["before"]["../victim.txt"] = [1, 1, 1, 1]
    data["saved"]["../victim.txt"] = "../../victim.txt"
    (tmp_path / "backup" / JOURNAL).write_text(json.dumps(data))
    assert recover_journal(tmp_path / "backup") == ([], [])
    (tmp_path / "backup" / JOURNAL).write_text("{not json")
    assert recover_journal(tmp_path / "backup") == ([], [])
    assert outside.read_text() == "keep me"


def test_recovery_keeps_what_changed_after_fwd9m_died(tmp_path):
    import os
    import time

    user, guard = _guarded(tmp_path)
    (user / "notes.txt").write_text("changed by a run")
    died = time.time()
    (user / "new_work.py").write_text("the user's work, after fwd9m was killed")
    (user / "big.bin").write_bytes(b"the user's edit")
    for name in ("new_work.py", "big.bin"):
        os.utime(user / name, (died + 60, died + 60))
    done, left = recover_journal(tmp_path / "backup", until=died + 4)
    assert (user / "notes.txt").read_text() == "before"
    assert (user / "new_work.py").exists() and (user / "big.bin").read_bytes() == b"the user's edit"
    assert "notes.txt" in done and {"new_work.py", "big.bin"} <= set(left)


def test_a_folder_that_is_not_this_users_own_is_never_recovered(tmp_path, monkeypatch):
    """A journal planted in a shared /tmp (another user's folder, or one anyone may
    write) must never be obeyed: it could name any folder as the one to 'put back'."""
    import os

    from fwd9m._runtime import lease

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.tex").write_text("precious")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr("tempfile.tempdir", None)
    for i, mode in enumerate((0o777, 0o700)):
        evil = tmp_path / "tmp" / f"fwd9m-evil{i}"
        (evil / "files").mkdir(parents=True)
        (evil / "owner.json").write_text(json.dumps({"pid": 999999, "start": "0", "where": lease._where()}))
        (evil / JOURNAL).write_text(
            json.dumps({"source": str(victim), "before": {}, "dirs": [], "links": {}, "folder": "files",
                        "skip": [], "inodes": [], "saved": {}})
        )  # fmt: skip
        os.chmod(evil, mode)
        if mode == 0o700 and os.getuid() == 0:
            os.chown(evil, 65534, 65534)  # another user's
    said = []
    lease.recover(said.append)
    assert (victim / "thesis.tex").read_text() == "precious" and not said
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == ["fwd9m-evil0", "fwd9m-evil1"]
