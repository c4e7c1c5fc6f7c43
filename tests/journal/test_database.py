"""The journal's connection: WAL and its syncs, one process and one connection, the file itself."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jigcmd.journal.schema import SCHEMA_VERSION, SchemaError
from jigcmd.journal.store import Journal, JournalError
from tests.journal.newrows import RUN, begin_row, close_unsynced, new_row


def test_the_journal_runs_in_wal_mode_its_commits_synced_by_the_journal(tmp_path: Path) -> None:
    """WAL persists in the file; synchronous=NORMAL (the journal syncs the WAL itself) and the
    schema version are set."""
    with Journal.open(tmp_path):
        pass
    raw = sqlite3.connect(tmp_path / "journal.sqlite3")
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    finally:
        raw.close()
    with Journal.open(tmp_path) as journal:
        settings = journal.settings()
    assert settings["journal_mode"] == "wal"
    assert settings["synchronous"] == 1  # NORMAL
    assert settings["busy_timeout"] == 10_000


def _record_syncs(monkeypatch: pytest.MonkeyPatch, db: Path) -> list[str]:
    """Each fdatasync from now on, as the file it syncs, checking SQLite's write lock is free."""
    synced: list[str] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        # Another connection can start a write now: the commit let the lock go first.
        other = sqlite3.connect(db, timeout=0, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
        finally:
            other.close()
        synced.append(target)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    return synced


def test_a_durable_write_syncs_the_wal_after_its_commit_let_the_lock_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """begin, the evidence and a close each fdatasync the WAL once, with SQLite's write lock
    already free; a close made without durability syncs nothing."""
    db = tmp_path / "journal.sqlite3"
    with Journal.open(tmp_path) as journal:
        synced = _record_syncs(monkeypatch, db)
        assert begin_row(journal)
        assert journal.record_result("op-1", root_run=RUN, outcome="evidence", result=b"ev")
        assert synced == [f"{db}-wal"] * 2
        assert close_unsynced(journal, "op-1")
        assert len(synced) == 2
        assert begin_row(journal, "op-2")
        assert synced == [f"{db}-wal"] * 3


def test_a_write_whose_wal_cannot_be_synced_fails_and_so_does_every_later_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An I/O error syncing the WAL is the write's failure (nothing may be dispatched on it),
    and every later write fails too, saying why: the failed pages may be gone from the
    kernel's cache, so no later sync could prove them. Reads still answer."""

    def fdatasync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    with Journal.open(tmp_path) as journal:
        monkeypatch.setattr(os, "fdatasync", fdatasync)
        with pytest.raises(OSError, match="Input/output error") as raised:
            journal.begin_now(new_row())
        assert raised.value.errno == errno.EIO
        monkeypatch.undo()
        with pytest.raises(OSError, match="could not be synced to disk") as later:
            journal.begin(new_row("op-2", run_id="r10"))
        assert later.value.errno == errno.EIO
        assert journal.get("op-2", root_run=RUN) is None
        assert journal.get("op-1", root_run=RUN) is not None


def test_a_journal_inherited_across_fork_refuses_to_be_used(tmp_path: Path) -> None:
    """A forked child must open its own journal; the inherited one raises JournalError."""
    journal = Journal.open(tmp_path)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            journal.get("x", root_run=RUN)
        except JournalError:
            os.write(write_fd, b"refused")
        os._exit(0)
    os.close(write_fd)
    os.waitpid(pid, 0)
    with os.fdopen(read_fd, "rb") as reader:
        assert reader.read() == b"refused"
    journal.close()


def test_a_closed_journal_refuses_to_be_used(tmp_path: Path) -> None:
    """Using a journal after close raises JournalError, not a sqlite error."""
    journal = Journal.open(tmp_path)
    journal.close()
    with pytest.raises(JournalError, match="closed"):
        journal.get("op-1", root_run=RUN)


def test_a_journal_from_a_newer_jigcmd_is_refused(tmp_path: Path) -> None:
    """A database at a higher schema version than ours is refused with advice."""
    Journal.open(tmp_path).close()
    raw = sqlite3.connect(tmp_path / "journal.sqlite3")
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.commit()
    raw.close()
    with pytest.raises(SchemaError, match="newer than this jigcmd understands"):
        Journal.open(tmp_path)


def test_the_database_file_is_private(tmp_path: Path) -> None:
    """The database is created 0600."""
    Journal.open(tmp_path).close()
    assert os.stat(tmp_path / "journal.sqlite3").st_mode & 0o777 == 0o600


@pytest.mark.slow  # spawns many interpreters at once
def test_many_processes_opening_a_new_journal_at_once_all_succeed(tmp_path: Path) -> None:
    """Switching a new database to WAL races other openers; every one of them still opens."""
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from jigcmd.journal.store import Journal\n"
        "while time.time() < float(sys.argv[2]):\n"
        "    pass\n"
        "Journal.open(Path(sys.argv[1])).close()\n"
    )
    for attempt in range(5):
        state = tmp_path / f"state-{attempt}"
        state.mkdir(mode=0o700)
        start = str(time.time() + 0.5)
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", script, str(state), start],
                stderr=subprocess.PIPE,
                env={"PYTHONPATH": str(Path(__file__).resolve().parents[2])},
            )
            for _ in range(6)
        ]
        errors = [p.communicate(timeout=60)[1].decode() for p in procs]
        assert [p.returncode for p in procs] == [0] * 6, "\n".join(errors)


def test_a_calls_commits_set_nothing_on_the_connection(tmp_path: Path) -> None:
    """Begin, evidence and an unsynced close, call after call: no busy-timeout statements and
    no synchronous toggles (each durable write syncs the WAL itself)."""
    statements: list[str] = []
    with Journal.open(tmp_path) as journal:
        for number in range(3):
            if number == 1:
                assert journal._db._conn is not None
                journal._db._conn.set_trace_callback(statements.append)
            operation_id = f"op-{number}"
            begun = journal.begin_now(new_row(operation_id, run_id=f"run-{number}"))
            assert begun is not None and begun.created
            assert journal.record_result(
                operation_id, root_run=RUN, outcome="evidence", result=b"ev", wait=False
            )
            assert close_unsynced(journal, operation_id, wait=False)
        assert journal._db._conn is not None
        journal._db._conn.set_trace_callback(None)
        settings = journal.settings()
    assert [s for s in statements if s.startswith("PRAGMA")] == []
    assert settings["synchronous"] == 1 and settings["busy_timeout"] == 10_000


def test_begin_now_waits_for_its_own_writer_only_a_moment(tmp_path: Path) -> None:
    """A write of this journal in another thread that keeps waiting: None, nothing written."""
    import threading  # noqa: PLC0415 - only this test uses a thread

    with Journal.open(tmp_path) as journal:
        other = sqlite3.connect(tmp_path / "journal.sqlite3", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        # The thread's waiting `begin` holds the journal's own lock until `other` is done.
        writer = threading.Thread(
            target=journal.begin, args=(new_row(deadline_unix_ms=1, run_id="run-1"),)
        )
        writer.start()
        try:
            deadline = time.monotonic() + 10
            while not journal._db._lock.locked() and time.monotonic() < deadline:
                time.sleep(0.001)
            assert journal._db._lock.locked()
            assert journal.begin_now(new_row(operation_id="op-2", deadline_unix_ms=1)) is None
        finally:
            other.execute("ROLLBACK")
            other.close()
            writer.join()
        assert journal.get("op-2", root_run=RUN) is None
        assert journal.get("op-1", root_run=RUN) is not None


def test_a_second_open_in_the_same_process_keeps_the_first_connections_locks(
    tmp_path: Path,
) -> None:
    """Opening the journal again in this process must not drop the first connection's locks.

    POSIX record locks belong to the process and a file: closing any descriptor of the
    database file drops every lock the process holds on it, SQLite's included. Without its
    shared lock, another process's clean close took the journal for the last one, checkpointed
    and deleted the write-ahead log under the first connection, whose next write then failed.
    """
    first = Journal.open(tmp_path)
    try:
        first.audit(actor="a", tool="t", argv=(), cwd="", decision="allow", matched_rule=None,
                    outcome="before")  # fmt: skip
        Journal.open(tmp_path).close()
        other = (
            "import sys\nfrom pathlib import Path\nfrom jigcmd.journal.store import Journal\n"
            "Journal.open(Path(sys.argv[1])).close()\n"
        )
        subprocess.run(
            [sys.executable, "-c", other, str(tmp_path)], check=True, timeout=60,
            env={"PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )  # fmt: skip
        assert (tmp_path / "journal.sqlite3-wal").exists(), "the WAL went while still in use"
        first.audit(actor="a", tool="t", argv=(), cwd="", decision="allow", matched_rule=None,
                    outcome="after")  # fmt: skip
        assert [row.outcome for row in first.audit_rows()] == ["after", "before"]
    finally:
        first.close()
