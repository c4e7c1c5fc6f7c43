"""A state directory that held a journal never silently becomes a new one (lost or corrupt WAL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.journal.failures import JournalLost
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal

_REPO = str(Path(__file__).resolve().parents[2])

# A writer that records one operation, says so, and waits to be SIGKILLed (no close).
_WRITER = """
import sys
from pathlib import Path
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal
journal = Journal.open(Path(sys.argv[1]))
journal.begin(NewRow(root_run="run-a", operation_id="op-1", signature="sig",
                     context="ctx", deadline_unix_ms=0, run_id="run-1"))
print("recorded", flush=True)
sys.stdin.read()
"""


def _killed_writer(state: Path) -> None:
    """Leave `state` as a SIGKILLed server leaves it: op-1 recorded, only in the WAL."""
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": _REPO},
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "recorded\n"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.communicate()
    assert (state / "journal.sqlite3-wal").stat().st_size > 0


def test_a_killed_writers_history_in_the_wal_is_kept(tmp_path: Path) -> None:
    """The ordinary crash: the WAL is there, the next open sees the operation."""
    _killed_writer(tmp_path)
    with Journal.open(tmp_path) as journal:
        assert journal.get("op-1", root_run="run-a") is not None


def test_a_lost_wal_after_a_kill_refuses_to_open_saying_what_was_lost(tmp_path: Path) -> None:
    """Without its WAL the journal would forget op-1; it refuses and says how to start afresh."""
    _killed_writer(tmp_path)
    (tmp_path / "journal.sqlite3-wal").unlink()
    with pytest.raises(JournalLost) as refused:
        Journal.open(tmp_path)
    message = str(refused.value)
    assert "journal.sqlite3-wal is missing" in message
    assert f"move {tmp_path} aside" in message


def test_a_corrupt_wal_header_refuses_to_open(tmp_path: Path) -> None:
    """SQLite would drop a WAL with a bad header silently; jigcmd refuses instead."""
    _killed_writer(tmp_path)
    wal = tmp_path / "journal.sqlite3-wal"
    with open(wal, "r+b") as handle:
        handle.write(b"\xff" * 32)
    with pytest.raises(JournalLost, match="corrupt"):
        Journal.open(tmp_path)


def test_a_database_truncated_to_nothing_refuses_to_open(tmp_path: Path) -> None:
    """A cleanly closed journal whose database was emptied is not taken for a new one."""
    with Journal.open(tmp_path) as journal:
        journal.begin(
            NewRow(
                root_run="run-a",
                operation_id="op-1",
                signature="s",
                context="c",
                deadline_unix_ms=0,
                run_id="r",
            )
        )
    assert not (tmp_path / "journal.sqlite3-wal").exists()
    os.truncate(tmp_path / "journal.sqlite3", 0)
    with pytest.raises(JournalLost, match="holds no journal"):
        Journal.open(tmp_path)


def test_a_cleanly_closed_journal_reopens_with_its_history(tmp_path: Path) -> None:
    """No false alarm: SQLite removing the WAL at the last close is a clean close."""
    with Journal.open(tmp_path) as journal:
        journal.begin(
            NewRow(
                root_run="run-a",
                operation_id="op-1",
                signature="s",
                context="c",
                deadline_unix_ms=0,
                run_id="r",
            )
        )
    with Journal.open(tmp_path) as journal, Journal.open(tmp_path) as other:
        assert journal.get("op-1", root_run="run-a") is not None
        assert other.get("op-1", root_run="run-a") is not None
    with Journal.open(tmp_path) as journal:
        assert journal.get("op-1", root_run="run-a") is not None
