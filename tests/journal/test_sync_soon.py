"""Syncing the journal without waiting: Linux AIO's fdatasync, and the journal's use of it."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jigcmd.journal.aiosync import AioSync, PendingSync
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal
from tests.syncfaults import failing_syncs, require_aio

RUN = "run-a"


@pytest.fixture
def aio() -> Iterator[AioSync]:
    """A context of this kernel's (a kernel without AIO is a skip, a failure under CI); the
    journal tests take it only for that check."""
    require_aio()
    failures: list[int] = []
    context = AioSync.open(failures.append)
    assert context is not None
    yield context
    context.close()
    assert failures == []


def _open_files() -> list[str]:
    """What this process's descriptors name (the listing's own descriptor not among them)."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
    return names


def test_a_sync_completes_and_lets_its_descriptors_go(aio: AioSync, tmp_path: Path) -> None:
    """The file's descriptor is the sync's once submitted (closed when it lands), its eventfd
    the waiter's (closed by `close`): nothing is left open."""
    wal = str(tmp_path / "wal")
    fd = os.open(wal, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    os.write(fd, b"frames")
    pending = aio.submit(fd)
    eventfd = os.readlink(f"/proc/self/fd/{pending.fileno()}")
    assert eventfd == "anon_inode:[eventfd]"
    pending.wait()
    assert pending.done() and pending.result == 0
    assert not aio.in_flight()
    assert wal not in _open_files()
    events = _open_files().count(eventfd)
    pending.close()
    pending.close()  # idempotent
    assert _open_files().count(eventfd) == events - 1


def test_a_file_the_kernel_cannot_sync_through_aio_stays_the_callers(
    aio: AioSync,
) -> None:
    """A pipe has no fsync: io_submit says EINVAL, and the descriptor is not closed."""
    read, write = os.pipe()
    try:
        with pytest.raises(OSError, match="io_submit: Invalid argument") as refused:
            aio.submit(read)
        assert refused.value.errno == errno.EINVAL
        os.fstat(read)  # still open
        assert not aio.in_flight()
    finally:
        os.close(read)
        os.close(write)


def test_a_failed_sync_is_reported_to_whoever_collects_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A completion with an error goes to the context's `failed` callback, with its errno."""
    require_aio()
    failures: list[int] = []
    context = AioSync.open(failures.append)
    assert context is not None
    try:
        failing_syncs(monkeypatch)
        pending = context.submit(os.open(tmp_path / "wal", os.O_RDWR | os.O_CREAT, 0o600))
        pending.wait()
        assert pending.result == errno.EIO
        assert failures == [errno.EIO]
        pending.close()
    finally:
        context.close()


def _begin(journal: Journal, operation_id: str = "op-1") -> None:
    new = NewRow(
        root_run=RUN,
        operation_id=operation_id,
        signature="sig",
        context="c",
        deadline_unix_ms=0,
        run_id="r-" + operation_id,
    )
    assert journal.begin(new).created


def _evidence_unsynced(journal: Journal, operation_id: str = "op-1") -> None:
    assert journal.record_result(
        operation_id, root_run=RUN, outcome="evidence", result=b"ev", durable=False
    )


def _landed(journal: Journal, pending: PendingSync) -> bool:
    try:
        while not journal.synced(pending):
            pending.wait()
        return True
    finally:
        pending.close()


def test_the_evidence_is_committed_then_synced_without_waiting(
    aio: AioSync, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`record_result(durable=False)` syncs nothing; `sync_soon` leaves the WAL's sync in
    flight (no fdatasync in this process) and `synced` says when it landed."""
    in_place: list[int] = []
    with Journal.open(tmp_path) as journal:
        _begin(journal)
        monkeypatch.setattr(os, "fdatasync", in_place.append)
        _evidence_unsynced(journal)
        pending = journal.sync_soon()
        assert pending is not None
        assert _landed(journal, pending)
        assert in_place == []
        row = journal.get("op-1", root_run=RUN)
        assert row is not None and row.result == b"ev" and row.is_open


# Each refusal records the submissions it refused (none where there is no context at all).
_Refuse = Callable[[pytest.MonkeyPatch, list[int]], None]


def _no_context(patched: pytest.MonkeyPatch, submitted: list[int]) -> None:
    patched.setattr(AioSync, "open", classmethod(lambda cls, failed: None))


def _no_aio_fsync(patched: pytest.MonkeyPatch, submitted: list[int]) -> None:
    def submit(self: AioSync, fd: int) -> PendingSync:
        submitted.append(fd)
        raise OSError(errno.EINVAL, "io_submit: Invalid argument")

    patched.setattr(AioSync, "submit", submit)


@pytest.mark.parametrize(
    ("refuse", "tries"), [(_no_context, 0), (_no_aio_fsync, 1)], ids=["no-context", "no-fsync"]
)
def test_without_aio_the_journal_syncs_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refuse: _Refuse, tries: int
) -> None:
    """A kernel that gives no context, or a file system that cannot sync through it: the WAL
    is synced before `sync_soon` returns, which says so with None; a refused submission is
    not tried again."""
    synced: list[str] = []
    submitted: list[int] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    refuse(monkeypatch, submitted)
    with Journal.open(tmp_path) as journal:
        _begin(journal)
        _begin(journal, "op-2")
        monkeypatch.setattr(os, "fdatasync", fdatasync)
        for operation_id in ("op-1", "op-2"):
            _evidence_unsynced(journal, operation_id)
            assert journal.sync_soon() is None
        assert synced == [f"{tmp_path / 'journal.sqlite3'}-wal"] * 2
        assert len(submitted) == tries


@pytest.mark.parametrize("waited", [True, False], ids=["waited-for", "nobody-waiting"])
def test_a_failed_sync_fails_every_later_write(
    aio: AioSync, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, waited: bool
) -> None:
    """The evidence's sync fails: `synced` raises, and the next write (even where nobody
    waited for the sync) fails saying why; the row stays as it was, open."""
    with Journal.open(tmp_path) as journal:
        _begin(journal)
        failing_syncs(monkeypatch)
        _evidence_unsynced(journal)
        pending = journal.sync_soon()
        assert pending is not None
        if waited:
            with pytest.raises(OSError, match="syncing the journal") as failed:
                _landed(journal, pending)
            assert failed.value.errno == errno.EIO
        else:
            pending.wait()
            pending.close()
        with pytest.raises(OSError, match="could not be synced to disk") as later:
            _begin(journal, "op-2")
        assert later.value.errno == errno.EIO
        assert journal.get("op-2", root_run=RUN) is None
        row = journal.get("op-1", root_run=RUN)
        assert row is not None and row.is_open


def test_closing_the_journal_waits_for_its_syncs_in_flight(aio: AioSync, tmp_path: Path) -> None:
    """A sync nobody waited for is landed and its descriptors let go by the close."""
    journal = Journal.open(tmp_path)
    _begin(journal)
    _evidence_unsynced(journal)
    pending = journal.sync_soon()
    assert pending is not None
    journal.close()
    assert pending.result == 0
    pending.close()
    # The state directory and its sub-directories stay held for the process's life
    # (`jigcmd.journal.statefiles`); no file in them does.
    assert not [
        name for name in _open_files() if name.startswith(str(tmp_path)) and not os.path.isdir(name)
    ]
