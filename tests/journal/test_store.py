"""The ownership journal: durability, one winner per operation id, replay bytes, closed rows."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jigcmd.journal import schema
from jigcmd.journal.identity import ProcessIdentity, current, identify
from jigcmd.journal.rows import NewRow
from jigcmd.journal.schema import LEGACY_RUN, SCHEMA_VERSION, SchemaError
from jigcmd.journal.store import Journal, JournalError

_REPO = str(Path(__file__).resolve().parents[2])
_SUPERVISOR = identify(os.getppid()) or current()
# The caller's run of these tests' operations.
RUN = "run-a"

# A second server process: waits for "go", then begins the same operation id.
_RACER = """
import sys
import time
from pathlib import Path
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal
journal = Journal.open(Path(sys.argv[1]))
sys.stdin.readline()
begin = journal.begin(NewRow(root_run="run-a", operation_id="op-race", signature=sys.argv[2],
                      context="ctx", deadline_unix_ms=0, run_id=sys.argv[3]))
print("created" if begin.created else "existing:" + str(begin.verdict(sys.argv[2])), flush=True)
"""


def _row(
    operation_id: str = "op-1",
    *,
    signature: str = "sig-a",
    context: str = "c",
    deadline_unix_ms: int = 0,
    run_id: str = "r9",
    supervisor: ProcessIdentity | None = None,
    cgroup_paths: tuple[str, ...] = (),
) -> NewRow:
    """A new journal row, with the envelope serving it when that is known."""
    return NewRow(
        root_run=RUN,
        operation_id=operation_id,
        signature=signature,
        context=context,
        deadline_unix_ms=deadline_unix_ms,
        run_id=run_id,
        supervisor=supervisor,
        cgroup_paths=cgroup_paths,
    )


def _close_unsynced(journal: Journal, operation_id: str, *, wait: bool = True) -> bool | None:
    """Close an open row done with its evidence, as a server does once the cleanup is proved."""
    return journal.finish(
        operation_id,
        root_run=RUN,
        outcome="evidence",
        result=b"ev",
        report=None,
        cleanup_complete=True,
        durable=False,
        wait=wait,
    )


def _begin(journal: Journal, operation_id: str = "op-1", signature: str = "sig-a") -> bool:
    return journal.begin(
        _row(
            operation_id,
            signature=signature,
            context="session-1",
            deadline_unix_ms=1_900_000_000_000,
            run_id=f"run-{operation_id}",
        )
    ).created


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
        assert _begin(journal)
        assert journal.record_result("op-1", root_run=RUN, outcome="evidence", result=b"ev")
        assert synced == [f"{db}-wal"] * 2
        assert _close_unsynced(journal, "op-1")
        assert len(synced) == 2
        assert _begin(journal, "op-2")
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
            journal.begin_now(_row())
        assert raised.value.errno == errno.EIO
        monkeypatch.undo()
        with pytest.raises(OSError, match="could not be synced to disk") as later:
            journal.begin(_row("op-2", run_id="r10"))
        assert later.value.errno == errno.EIO
        assert journal.get("op-2", root_run=RUN) is None
        assert journal.get("op-1", root_run=RUN) is not None


def test_a_row_written_before_dispatch_survives_close_and_reopen(tmp_path: Path) -> None:
    """Everything `begin` and `record_envelope` wrote is there after reopening."""
    with Journal.open(tmp_path) as journal:
        assert _begin(journal)
        assert journal.record_envelope(
            "op-1",
            root_run=RUN,
            supervisor=_SUPERVISOR,
            cgroup_paths=("/sys/fs/cgroup/pids/jigcmd/jigcmd-run-op-1",),
            netns="net:[4026532000]",
            plan_digest="sha256:plan",
        )
    with Journal.open(tmp_path) as journal:
        row = journal.get("op-1", root_run=RUN)
        assert [r.operation_id for r in journal.open_rows()] == ["op-1"]
    assert row is not None
    assert (row.state, row.signature, row.context, row.run_id) == (
        "running",
        "sig-a",
        "session-1",
        "run-op-1",
    )
    assert row.deadline_unix_ms == 1_900_000_000_000
    assert row.supervisor == _SUPERVISOR
    assert row.owner == current()
    assert row.cgroup_paths == ("/sys/fs/cgroup/pids/jigcmd/jigcmd-run-op-1",)
    assert (row.netns, row.plan_digest, row.cgroup_job) == (
        "net:[4026532000]",
        "sha256:plan",
        "jigcmd-run-op-1",
    )


def test_the_recorded_result_bytes_come_back_identical_after_reopening(tmp_path: Path) -> None:
    """Replay data is the exact bytes stored, non-UTF-8 and all; the row is done."""
    result = b'{"value":{"exitCode":0,"stdout":"\\u00e9"}}\xff'
    report = b'{"wallMs":1.5}'
    with Journal.open(tmp_path) as journal:
        _begin(journal)
        assert journal.finish(
            "op-1",
            root_run=RUN,
            outcome="evidence",
            result=result,
            report=report,
            cleanup_complete=True,
        )
    with Journal.open(tmp_path) as journal:
        again = journal.begin(_row(context="s2", run_id="r2"))
    assert not again.created
    assert again.verdict("sig-a") == "replay"
    assert again.existing is not None
    assert again.row.result == result
    assert again.row.report == report
    assert (again.row.state, again.row.outcome, again.row.cleanup) == (
        "done",
        "evidence",
        "complete",
    )


def test_a_different_signature_is_a_conflict_whatever_the_state(tmp_path: Path) -> None:
    """A reused operation id with another signature is `conflict`, before any state check."""
    with Journal.open(tmp_path) as journal:
        _begin(journal)
        assert journal.begin(_row(signature="sig-b")).verdict("sig-b") == "conflict"
        journal.mark_uncertain("op-1", root_run=RUN, reason="fenced", cleanup_complete=True)
        assert journal.begin(_row(signature="sig-b")).verdict("sig-b") == "conflict"


def test_an_open_row_with_the_same_signature_is_joined(tmp_path: Path) -> None:
    """A second begin of an in-flight operation gets `join` and inserts nothing."""
    with Journal.open(tmp_path) as journal:
        _begin(journal)
        begin = journal.begin(_row())
        assert begin.verdict("sig-a") == "join"
        assert begin.row.run_id == "run-op-1"


def test_an_uncertain_row_stays_uncertain_whatever_comes_later(tmp_path: Path) -> None:
    """After `mark_uncertain`, finish, claim, envelope and a second mark all write nothing."""
    with Journal.open(tmp_path) as journal:
        _begin(journal)
        assert journal.mark_uncertain(
            "op-1",
            root_run=RUN,
            reason="a prior command dispatch was fenced",
            cleanup_complete=True,
        )
        assert not journal.finish(
            "op-1",
            root_run=RUN,
            outcome="evidence",
            result=b"{}",
            report=None,
            cleanup_complete=True,
        )
        assert not journal.record_envelope(
            "op-1",
            root_run=RUN,
            supervisor=_SUPERVISOR,
            cgroup_paths=(),
            netns="n",
            plan_digest="p",
        )
        assert not journal.mark_uncertain(
            "op-1", root_run=RUN, reason="other", cleanup_complete=False
        )
    with Journal.open(tmp_path) as journal:
        row = journal.get("op-1", root_run=RUN)
        begin = journal.begin(_row())
        assert journal.open_rows() == []
    assert row is not None
    assert (row.state, row.reason, row.result, row.cleanup) == (
        "uncertain",
        "a prior command dispatch was fenced",
        None,
        "complete",
    )
    assert begin.verdict("sig-a") == "uncertain"


def test_recording_the_envelope_moves_a_row_to_running_with_its_supervisor(
    tmp_path: Path,
) -> None:
    """`record_envelope` moves dispatching → running with the supervisor and its cgroups."""
    with Journal.open(tmp_path) as journal:
        _begin(journal)
        assert journal.record_envelope(
            "op-1",
            root_run=RUN,
            supervisor=_SUPERVISOR,
            cgroup_paths=("/cg/j",),
            netns="net:[1]",
            plan_digest="",
        )
        row = journal.get("op-1", root_run=RUN)
    assert row is not None
    assert (row.state, row.supervisor, row.cgroup_paths) == ("running", _SUPERVISOR, ("/cg/j",))


def test_a_row_begun_with_its_envelope_is_running_with_it_from_the_first_commit(
    tmp_path: Path,
) -> None:
    """`begin` with a known (prepared) envelope records it in the same row insert."""
    with Journal.open(tmp_path) as journal:
        begun = journal.begin(
            _row(
                context="",
                run_id="0123456789abcdef",
                supervisor=_SUPERVISOR,
                cgroup_paths=("/cg/jigcmd-0123456789abcdef",),
            )
        )
        assert begun.created
    with Journal.open(tmp_path) as journal:
        row = journal.get("op-1", root_run=RUN)
    assert row is not None
    assert (row.state, row.supervisor, row.cgroup_paths) == (
        "running",
        _SUPERVISOR,
        ("/cg/jigcmd-0123456789abcdef",),
    )
    # The row's job name is the envelope's: recovery finds it by the run id alone.
    assert row.cgroup_job == "jigcmd-0123456789abcdef"


def test_a_failed_cleanup_turns_a_finished_run_uncertain_and_is_listed_for_doctor(
    tmp_path: Path,
) -> None:
    """finish with unconfirmed cleanup keeps the result but closes `uncertain`, cleanup failed."""
    with Journal.open(tmp_path) as journal:
        _begin(journal)
        _begin(journal, "op-2")
        journal.finish(
            "op-1",
            root_run=RUN,
            outcome="failure",
            result=b'{"code":"X"}',
            report=None,
            cleanup_complete=False,
            problems="cgroup still populated after kill",
        )
        journal.finish(
            "op-2",
            root_run=RUN,
            outcome="evidence",
            result=b"{}",
            report=None,
            cleanup_complete=True,
        )
        failures = journal.cleanup_failures()
    assert [r.operation_id for r in failures] == ["op-1"]
    assert (failures[0].state, failures[0].cleanup, failures[0].problems) == (
        "uncertain",
        "failed",
        "cgroup still populated after kill",
    )


def test_record_cleanup_only_updates_closed_rows(tmp_path: Path) -> None:
    """A re-checked cleanup can be recorded on a closed row, never on an open one."""
    with Journal.open(tmp_path) as journal:
        _begin(journal)
        assert not journal.record_cleanup("op-1", root_run=RUN, complete=True)
        journal.mark_uncertain(
            "op-1", root_run=RUN, reason="r", cleanup_complete=False, problems="p"
        )
        assert journal.record_cleanup("op-1", root_run=RUN, complete=True)
        assert journal.cleanup_failures() == []


def test_two_processes_beginning_the_same_operation_id_have_exactly_one_winner(
    tmp_path: Path,
) -> None:
    """Concurrent begins from two processes: one inserts, the other sees the row (a conflict)."""
    Journal.open(tmp_path).close()
    env = {**os.environ, "PYTHONPATH": _REPO}
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(tmp_path), signature, run_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for signature, run_id in (("sig-a", "run-a"), ("sig-b", "run-b"))
    ]
    outputs = []
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()
    for racer in racers:
        out, _ = racer.communicate()
        assert racer.returncode == 0
        outputs.append(out.strip())
    assert sorted(outputs) == ["created", "existing:conflict"]
    with Journal.open(tmp_path) as journal:
        assert len(journal.open_rows()) == 1


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


def test_a_result_recorded_on_an_open_row_keeps_it_open_and_a_closed_row_refuses_one(
    tmp_path: Path,
) -> None:
    """Evidence made durable during the cleanup: the row stays open; after the close, no."""
    with Journal.open(tmp_path) as journal:
        _begin(journal)
        assert journal.record_result("op-1", root_run=RUN, outcome="evidence", result=b"ev")
        row = journal.get("op-1", root_run=RUN)
        assert row is not None and row.is_open and row.result == b"ev"
        assert _close_unsynced(journal, "op-1")
        assert not journal.record_result("op-1", root_run=RUN, outcome="evidence", result=b"other")


def test_a_lost_row_is_done_only_with_recorded_evidence_and_a_proved_cleanup(
    tmp_path: Path,
) -> None:
    """close_lost: evidence + cleanup proved → done; either missing → uncertain."""
    with Journal.open(tmp_path) as journal:
        for operation_id, evidence, cleanup in (
            ("op-both", True, True),
            ("op-no-cleanup", True, False),
            ("op-no-evidence", False, True),
        ):
            _begin(journal, operation_id)
            if evidence:
                journal.record_result(operation_id, root_run=RUN, outcome="evidence", result=b"ev")
            assert journal.close_lost(
                operation_id, root_run=RUN, reason="gone", cleanup_complete=cleanup
            )
            assert not journal.close_lost(
                operation_id, root_run=RUN, reason="again", cleanup_complete=True
            )
        states = {
            op: (row.state, row.reason)
            for op in ("op-both", "op-no-cleanup", "op-no-evidence")
            if (row := journal.get(op, root_run=RUN)) is not None
        }
    assert states == {
        "op-both": ("done", ""),
        "op-no-cleanup": ("uncertain", "gone"),
        "op-no-evidence": ("uncertain", "gone"),
    }


def test_a_result_recorded_without_waiting_yields_to_another_writer_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """`record_result(wait=False)`: None at once while another process writes; then it works."""
    with Journal.open(tmp_path) as journal:
        _begin(journal)
        other = sqlite3.connect(tmp_path / "journal.sqlite3", isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            written = journal.record_result(
                "op-1", root_run=RUN, outcome="evidence", result=b"ev", wait=False
            )
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert written is None
        row = journal.get("op-1", root_run=RUN)
        assert row is not None and row.outcome is None
        assert journal.settings()["busy_timeout"] == 10_000
        assert journal.record_result(
            "op-1", root_run=RUN, outcome="evidence", result=b"ev", wait=False
        )
        row = journal.get("op-1", root_run=RUN)
    assert row is not None and (row.outcome, row.result) == ("evidence", b"ev")


def test_begin_now_writes_when_uncontended_and_never_waits_for_another_writer(
    tmp_path: Path,
) -> None:
    """Another process's open write transaction: None at once, nothing written; then it works."""
    with Journal.open(tmp_path) as journal:
        other = sqlite3.connect(tmp_path / "journal.sqlite3", isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            begun = journal.begin_now(_row(deadline_unix_ms=1, run_id="run-1"))
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert begun is None
        # The zero busy timeout of the attempt was undone.
        assert journal.get("op-1", root_run=RUN) is None
        assert journal.settings()["busy_timeout"] == 10_000
        again = journal.begin_now(_row(deadline_unix_ms=1, run_id="run-1"))
        assert again is not None and again.created
        known = journal.begin_now(_row(deadline_unix_ms=1, run_id="run-2"))
        assert known is not None and not known.created


def test_the_same_operation_id_in_another_run_is_a_new_operation(tmp_path: Path) -> None:
    """Identity holds within a run: another run's `begin` of the id creates its own row."""
    with Journal.open(tmp_path) as journal:
        assert _begin(journal)
        other = journal.begin(
            NewRow(
                root_run="run-b",
                operation_id="op-1",
                signature="sig-b",
                context="c",
                deadline_unix_ms=0,
                run_id="r-b",
            )
        )
        assert other.created
        assert journal.begin(_row(signature="sig-b")).verdict("sig-b") == "conflict"
        assert [(r.root_run, r.operation_id) for r in journal.open_rows()] == [
            ("run-a", "op-1"),
            ("run-b", "op-1"),
        ]


def test_a_journal_of_the_first_schema_is_migrated_and_its_rows_kept_outside_every_run(
    tmp_path: Path,
) -> None:
    """A version 1 journal: its rows move to the run "" (no server is given it), still open."""
    raw = sqlite3.connect(tmp_path / "journal.sqlite3", isolation_level=None)
    try:
        for statement in schema._statements(schema._V1):
            raw.execute(statement)
        raw.execute(
            "INSERT INTO operations (operation_id, signature, context, created_unix_ms,"
            " updated_unix_ms, deadline_unix_ms, run_id, owner_pid, owner_start, boot_id, state)"
            " VALUES ('candidate-tests', 'sig-a', 'c', 1, 1, 0, 'r-old', 1, 1, 'b', 'running')"
        )
        raw.execute("PRAGMA user_version = 1")
    finally:
        raw.close()
    with Journal.open(tmp_path) as journal:
        assert journal.settings()["user_version"] == SCHEMA_VERSION
        (legacy,) = journal.open_rows()
        assert (legacy.root_run, legacy.operation_id, legacy.run_id) == (
            LEGACY_RUN,
            "candidate-tests",
            "r-old",
        )
        assert journal.get("candidate-tests", root_run=RUN) is None
        assert journal.begin(_row("candidate-tests", signature="sig-b", run_id="r-new")).created


def test_a_close_without_waiting_yields_to_another_writer_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """`finish(wait=False)`: None at once while another process writes; then it closes."""
    with Journal.open(tmp_path) as journal:
        _begin(journal)
        other = sqlite3.connect(tmp_path / "journal.sqlite3", isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            closed = journal.finish(
                "op-1",
                root_run=RUN,
                outcome="evidence",
                result=b"ev",
                report=None,
                cleanup_complete=True,
                wait=False,
            )
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert closed is None
        row = journal.get("op-1", root_run=RUN)
        assert row is not None and row.is_open
        assert journal.finish(
            "op-1",
            root_run=RUN,
            outcome="evidence",
            result=b"ev",
            report=None,
            cleanup_complete=True,
            wait=False,
        )
        row = journal.get("op-1", root_run=RUN)
    assert row is not None and row.state == "done"


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
            begun = journal.begin_now(_row(operation_id, run_id=f"run-{number}"))
            assert begun is not None and begun.created
            assert journal.record_result(
                operation_id, root_run=RUN, outcome="evidence", result=b"ev", wait=False
            )
            assert _close_unsynced(journal, operation_id, wait=False)
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
            target=journal.begin, args=(_row(deadline_unix_ms=1, run_id="run-1"),)
        )
        writer.start()
        try:
            deadline = time.monotonic() + 10
            while not journal._db._lock.locked() and time.monotonic() < deadline:
                time.sleep(0.001)
            assert journal._db._lock.locked()
            assert journal.begin_now(_row(operation_id="op-2", deadline_unix_ms=1)) is None
        finally:
            other.execute("ROLLBACK")
            other.close()
            writer.join()
        assert journal.get("op-2", root_run=RUN) is None
        assert journal.get("op-1", root_run=RUN) is not None
