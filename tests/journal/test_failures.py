"""How a failure to use the journal is worded: damaged only on SQLite's own verdict."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from jigcmd.journal.failures import unusable


def _sqlite_error(code: int, text: str) -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError(text)
    exc.sqlite_errorcode = code  # as SQLite sets it
    return exc


def test_a_disk_io_error_with_room_on_the_disk_is_not_called_damaged(tmp_path: Path) -> None:
    """SQLITE_IOERR_SHMSIZE where there is space: check the disk, keep the journal."""
    refusal = unusable(tmp_path / "journal.sqlite3", _sqlite_error(4874, "disk I/O error"))
    assert refusal.cause == "disk I/O error"
    assert "damaged, so keep it" in refusal.fix and "aside" not in refusal.fix


def test_a_corrupt_database_is_called_damaged(tmp_path: Path) -> None:
    """SQLITE_CORRUPT is SQLite's verdict on the file: the fix moves it aside."""
    refusal = unusable(
        tmp_path / "journal.sqlite3", _sqlite_error(11, "database disk image is malformed")
    )
    assert refusal.fix.startswith("the journal is damaged: move")


def test_a_missing_table_found_by_our_own_check_is_called_damaged(tmp_path: Path) -> None:
    """A DatabaseError without SQLite's code is one of our schema checks: damaged."""
    refusal = unusable(tmp_path / "journal.sqlite3", sqlite3.DatabaseError("table missing"))
    assert "the journal is damaged" in refusal.fix


def test_no_space_left_is_named_full_and_nothing_lost(tmp_path: Path) -> None:
    """ENOSPC: the filesystem is full, free space, and the journal is kept."""
    refusal = unusable(tmp_path / "journal.sqlite3", OSError(errno.ENOSPC, "No space left"))
    assert refusal.cause.startswith(f"the filesystem holding {tmp_path} is full")
    assert "free space" in refusal.fix and "nothing recorded was lost" in refusal.fix


def test_a_read_only_filesystem_is_named_as_mounted_read_only(tmp_path: Path) -> None:
    """EROFS: remount read-write, never "damaged"."""
    refusal = unusable(tmp_path / "journal.sqlite3", OSError(errno.EROFS, "Read-only"))
    assert refusal.cause == f"the filesystem holding {tmp_path} is mounted read-only"
    assert "remount it read-write" in refusal.fix


def test_the_message_is_one_line_with_file_cause_and_fix(tmp_path: Path) -> None:
    """str() is what every verb prints: `journal <file>: <cause>; fix: <fix>`."""
    path = tmp_path / "journal.sqlite3"
    refusal = unusable(path, OSError(errno.ENOSPC, "No space left"))
    assert str(refusal) == f"journal {path}: {refusal.cause}; fix: {refusal.fix}"
