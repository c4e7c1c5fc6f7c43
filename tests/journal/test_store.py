"""The ownership journal's rows: one winner per operation id, replay bytes, closed rows."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from jigcmd.journal import identity, schema
from jigcmd.journal.identity import ProcessIdentity, current, identify
from jigcmd.journal.rows import NewRow
from jigcmd.journal.schema import LEGACY_RUN, SCHEMA_VERSION
from jigcmd.journal.store import Journal
from tests.journal.newrows import RUN, begin_row, close_unsynced, new_row

_REPO = str(Path(__file__).resolve().parents[2])
_SUPERVISOR = identify(os.getppid()) or current()

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


def test_a_row_written_before_dispatch_survives_close_and_reopen(tmp_path: Path) -> None:
    """Everything `begin` and `record_envelope` wrote is there after reopening."""
    with Journal.open(tmp_path) as journal:
        assert begin_row(journal)
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
        begin_row(journal)
        assert journal.finish(
            "op-1",
            root_run=RUN,
            outcome="evidence",
            result=result,
            report=report,
            cleanup_complete=True,
        )
    with Journal.open(tmp_path) as journal:
        again = journal.begin(new_row(context="s2", run_id="r2"))
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
        begin_row(journal)
        assert journal.begin(new_row(signature="sig-b")).verdict("sig-b") == "conflict"
        journal.mark_uncertain("op-1", root_run=RUN, reason="fenced", cleanup_complete=True)
        assert journal.begin(new_row(signature="sig-b")).verdict("sig-b") == "conflict"


def test_an_open_row_with_the_same_signature_is_joined(tmp_path: Path) -> None:
    """A second begin of an in-flight operation gets `join` and inserts nothing."""
    with Journal.open(tmp_path) as journal:
        begin_row(journal)
        begin = journal.begin(new_row())
        assert begin.verdict("sig-a") == "join"
        assert begin.row.run_id == "run-op-1"


def test_an_uncertain_row_stays_uncertain_whatever_comes_later(tmp_path: Path) -> None:
    """After `mark_uncertain`, finish, claim, envelope and a second mark all write nothing."""
    with Journal.open(tmp_path) as journal:
        begin_row(journal)
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
        begin = journal.begin(new_row())
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
        begin_row(journal)
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
            new_row(
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
        begin_row(journal)
        begin_row(journal, "op-2")
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
        begin_row(journal)
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


def test_a_result_recorded_on_an_open_row_keeps_it_open_and_a_closed_row_refuses_one(
    tmp_path: Path,
) -> None:
    """Evidence made durable during the cleanup: the row stays open; after the close, no."""
    with Journal.open(tmp_path) as journal:
        begin_row(journal)
        assert journal.record_result("op-1", root_run=RUN, outcome="evidence", result=b"ev")
        row = journal.get("op-1", root_run=RUN)
        assert row is not None and row.is_open and row.result == b"ev"
        assert close_unsynced(journal, "op-1")
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
            begin_row(journal, operation_id)
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
        begin_row(journal)
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
            begun = journal.begin_now(new_row(deadline_unix_ms=1, run_id="run-1"))
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert begun is None
        # The zero busy timeout of the attempt was undone.
        assert journal.get("op-1", root_run=RUN) is None
        assert journal.settings()["busy_timeout"] == 10_000
        again = journal.begin_now(new_row(deadline_unix_ms=1, run_id="run-1"))
        assert again is not None and again.created
        known = journal.begin_now(new_row(deadline_unix_ms=1, run_id="run-2"))
        assert known is not None and not known.created


def test_the_same_operation_id_in_another_run_is_a_new_operation(tmp_path: Path) -> None:
    """Identity holds within a run: another run's `begin` of the id creates its own row."""
    with Journal.open(tmp_path) as journal:
        assert begin_row(journal)
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
        assert journal.begin(new_row(signature="sig-b")).verdict("sig-b") == "conflict"
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
        assert journal.begin(new_row("candidate-tests", signature="sig-b", run_id="r-new")).created


def test_identities_recorded_before_pid_namespaces_read_back_as_the_readers_own(
    tmp_path: Path,
) -> None:
    """A version 7 journal: its owners and supervisors migrate with pidns 0; new ones have it."""
    raw = sqlite3.connect(tmp_path / "journal.sqlite3", isolation_level=None)
    try:
        for step in schema._STEPS[:7]:
            for statement in schema._statements(step):
                raw.execute(statement)
        raw.execute(
            "INSERT INTO operations (root_run, operation_id, signature, context,"
            " created_unix_ms, updated_unix_ms, deadline_unix_ms, run_id, owner_pid,"
            " owner_start, boot_id, state, supervisor_pid, supervisor_start)"
            " VALUES ('run-a', 'op-old', 's', 'c', 1, 1, 0, 'r-old', 7, 8, 'b', 'running', 9, 10)"
        )
        raw.execute(
            "INSERT INTO jarvis_runs (tool, argv, cwd, actor, decision, matched_rule, reason,"
            " status, owner_pid, owner_start, boot_id, created_unix_ms, finished_unix_ms)"
            " VALUES ('t', '[\"x\"]', '', 'a', 'allow', 'r', '', 'running', 7, 8, 'b', 1, NULL)"
        )
        raw.execute("PRAGMA user_version = 7")
    finally:
        raw.close()
    with Journal.open(tmp_path) as journal:
        assert journal.settings()["user_version"] == SCHEMA_VERSION
        old = journal.get("op-old", root_run="run-a")
        assert old is not None and old.supervisor is not None
        assert old.owner == ProcessIdentity(pid=7, start=8, boot_id="b", pidns=0)
        assert old.supervisor == ProcessIdentity(pid=9, start=10, boot_id="b", pidns=0)
        (run,) = journal.jarvis_running()
        assert run.owner == ProcessIdentity(pid=7, start=8, boot_id="b", pidns=0)
        new = journal.begin(new_row("op-new", run_id="r-new")).row
        assert new.owner == identity.current() and new.owner.pidns == identity.pid_namespace()


def test_a_close_without_waiting_yields_to_another_writer_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """`finish(wait=False)`: None at once while another process writes; then it closes."""
    with Journal.open(tmp_path) as journal:
        begin_row(journal)
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
