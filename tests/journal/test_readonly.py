"""A journal opened to be read only: nothing written, and readable on a read-only mount.

The mount is a small tmpfs of the test's own (`tests.faults.disk`), remounted read-only
after a writer closed the journal cleanly (no WAL left) or was killed (its commits only in
the WAL): both are read whole.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.durable.statedir import prepare_state_dir
from jigcmd.journal.failures import JournalUnusable
from jigcmd.journal.marker import MARKER_NAME
from jigcmd.journal.rows import NewRow
from jigcmd.journal.schema import SchemaError
from jigcmd.journal.store import DB_NAME, Journal
from tests.faults.disk import SmallDisk, required_disk

# A writer that records one operation and is killed before it closes: its row is in the WAL.
_KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal
journal = Journal.open(Path(sys.argv[1]))
journal.begin(NewRow(root_run="run-a", operation_id="op-killed", signature="s", context="c",
                     deadline_unix_ms=0, run_id="k" * 16))
os.kill(os.getpid(), signal.SIGKILL)
"""


def _new(operation_id: str) -> NewRow:
    return NewRow(
        root_run="run-a",
        operation_id=operation_id,
        signature="s",
        context="c",
        deadline_unix_ms=0,
        run_id=operation_id.ljust(16, "0"),
    )


def _closed_journal(state: Path) -> None:
    with Journal.open(prepare_state_dir(state)) as journal:
        journal.begin(_new("op-closed"))


def _killed_writer(state: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_WRITER, str(state)], capture_output=True, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert (state / f"{DB_NAME}-wal").stat().st_size > 0


def _files(state: Path) -> dict[str, bytes]:
    """Each file's bytes, and each directory's names (`live`, the liveness locks)."""
    return {
        path.name: path.read_bytes() if path.is_file() else repr(sorted(path.iterdir())).encode()
        for path in sorted(state.iterdir())
    }


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """A 4 MiB tmpfs mounted for this test only (root), unmounted after."""
    with required_disk() as mount:
        yield mount


def test_a_cleanly_closed_journal_on_a_read_only_mount_is_read_whole(disk: SmallDisk) -> None:
    """No WAL, no -shm, none can be made: read as immutable, every row there."""
    _closed_journal(disk.path)
    disk.read_only()
    with Journal.open_read_only(disk.path) as journal:
        assert [row.operation_id for row in journal.rows()] == ["op-closed"]


def test_a_killed_writers_journal_on_a_read_only_mount_is_read_with_its_wal(
    disk: SmallDisk,
) -> None:
    """The row only in the WAL is read: SQLite reads a WAL whose -shm is there."""
    _closed_journal(disk.path)
    _killed_writer(disk.path)
    disk.read_only()
    with Journal.open_read_only(disk.path) as journal:
        names = sorted(row.operation_id for row in journal.rows())
    assert names == ["op-closed", "op-killed"]


def test_a_wal_without_its_shm_on_a_read_only_mount_is_refused_naming_a_copy(
    disk: SmallDisk,
) -> None:
    """Immutable would skip the WAL's commits: refused, the fix a writable copy."""
    _killed_writer(prepare_state_dir(disk.path))
    (disk.path / f"{DB_NAME}-shm").unlink()
    disk.read_only()
    with pytest.raises(JournalUnusable) as refused:
        Journal.open_read_only(disk.path)
    assert "write-ahead log" in refused.value.cause
    assert "copy" in refused.value.fix and "damaged" not in str(refused.value)


def test_reading_writes_nothing_to_a_journal_closed_cleanly(tmp_path: Path) -> None:
    """The database and marker keep their bytes; SQLite's empty -wal and -shm are all it adds."""
    state = tmp_path / "state"
    _closed_journal(state)
    before = _files(state)
    with Journal.open_read_only(state) as journal:
        assert len(journal.rows()) == 1
    after = _files(state)
    assert {name: after[name] for name in before} == before
    assert after.get(f"{DB_NAME}-wal", b"") == b""
    assert MARKER_NAME in after


def test_a_journal_of_an_older_schema_is_refused_not_migrated(tmp_path: Path) -> None:
    """Reading never migrates: the fix is a verb that writes, once."""
    state = tmp_path / "state"
    _closed_journal(state)
    with Journal.open(state) as journal, journal._db.write() as conn:
        conn.execute("PRAGMA user_version = 5")
    marked = (state / MARKER_NAME).read_bytes()
    with pytest.raises(SchemaError, match="older than this jigcmd"):
        Journal.open_read_only(state)
    assert (state / MARKER_NAME).read_bytes() == marked
