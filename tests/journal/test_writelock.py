"""The journal's write lock: taken at once, refused at once, or waited for in short steps."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.journal import writelock
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "db.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    return path


def _no_pause(seconds: float) -> None:
    pytest.fail(f"paused {seconds} s where no pause was due")


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, timeout=0)


@pytest.fixture
def conn(database: Path) -> Iterator[sqlite3.Connection]:
    """The test's own connection, closed at its end (Python 3.13 warns of one left open)."""
    own = _connect(database)
    yield own
    own.close()


@pytest.fixture
def holder(database: Path) -> Iterator[sqlite3.Connection]:
    """Another connection holding the write lock (as another server's transaction would)."""
    other = _connect(database)
    other.execute("BEGIN IMMEDIATE")
    yield other
    if other.in_transaction:
        other.execute("ROLLBACK")
    other.close()


def test_an_uncontended_lock_is_taken_at_once_without_a_pause(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(writelock, "_sleep", pauses.append)
    writelock.begin_immediate(conn, timeout_s=10.0)
    assert conn.in_transaction and pauses == []
    conn.execute("INSERT INTO t VALUES (1)")
    conn.execute("COMMIT")


def test_a_held_lock_refuses_a_write_that_must_not_wait(
    conn: sqlite3.Connection, holder: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writelock, "_sleep", _no_pause)
    with pytest.raises(writelock.WouldWait):
        writelock.begin_immediate(conn, timeout_s=None)
    assert not conn.in_transaction


def test_a_waiting_write_tries_again_in_short_steps_until_the_lock_is_free(
    conn: sqlite3.Connection, holder: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1 ms, then 2 ms at most between tries (SQLite's own handler sleeps up to 100 ms)."""
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 6:
            holder.execute("COMMIT")  # the other writer is done

    monkeypatch.setattr(writelock, "_sleep", sleep)
    writelock.begin_immediate(conn, timeout_s=10.0)
    assert conn.in_transaction
    assert pauses == [0.001, 0.002, 0.002, 0.002, 0.002, 0.002]
    conn.execute("ROLLBACK")


def test_a_waiting_write_gives_up_as_sqlite_would_once_its_timeout_passes(
    conn: sqlite3.Connection, holder: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(writelock, "_sleep", sleep)
    with pytest.raises(sqlite3.OperationalError, match="locked") as raised:
        writelock.begin_immediate(conn, timeout_s=0.0045, clock=lambda: now[0])
    assert writelock.is_busy(raised.value)
    assert not conn.in_transaction
    # The last pause is cut to the deadline: no try is made later than the timeout allows.
    assert pauses == pytest.approx([0.001, 0.002, 0.0015])


def test_an_error_other_than_a_held_lock_is_raised_at_once(
    conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction already open is the caller's: refused, and left as it was."""
    conn.execute("BEGIN")
    monkeypatch.setattr(writelock, "_sleep", _no_pause)
    with pytest.raises(sqlite3.OperationalError, match="within a transaction"):
        writelock.begin_immediate(conn, timeout_s=10.0)
    assert conn.in_transaction
    conn.execute("ROLLBACK")


def test_a_journal_write_waits_for_another_process_in_these_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Journal` writes wait here (SQLite's busy handler off for them), and still land."""
    with Journal.open(tmp_path) as journal:
        other = _connect(tmp_path / "journal.sqlite3")
        other.execute("BEGIN IMMEDIATE")
        pauses: list[float] = []

        def sleep(seconds: float) -> None:
            pauses.append(seconds)
            if len(pauses) == 3:
                other.execute("ROLLBACK")

        monkeypatch.setattr(writelock, "_sleep", sleep)
        try:
            begun = journal.begin(_new_row())
        finally:
            other.close()
        assert begun.created
        assert pauses == [0.001, 0.002, 0.002]
        assert journal.get("op-1", root_run="run-a") is not None
        # Reads still wait in SQLite's handler, with the journal's timeout.
        assert journal.settings()["busy_timeout"] == 10_000


def _new_row() -> NewRow:
    return NewRow(
        root_run="run-a",
        operation_id="op-1",
        signature="s" * 64,
        context="test",
        deadline_unix_ms=1,
        run_id="run-1",
    )
