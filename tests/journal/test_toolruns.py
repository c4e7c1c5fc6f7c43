"""The jarvis provider's records: runs and the append-only audit trail."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from jigcmd.journal import schema
from jigcmd.journal.store import Journal
from jigcmd.journal.toolruns import JARVIS_OUTPUT_CAP_CHARS


def test_an_allowed_run_is_running_until_finished_and_then_keeps_its_output(
    tmp_path: Path,
) -> None:
    """An allowed call starts `running`; finishing records exit, output and timings durably."""
    with Journal.open(tmp_path) as journal:
        run_id = journal.jarvis_begin(
            tool="jarvis.run.create",
            argv=["/bin/echo", "hi"],
            cwd="/tmp",
            actor="tok_abcd_1234",
            decision="allow",
            matched_rule="echo",
            reason="rule echo allows /bin/echo",
        )
        running = journal.jarvis_get(run_id)
        assert running is not None
        assert running.status == "running"
        assert [r.run_id for r in journal.jarvis_running()] == [run_id]
        assert journal.jarvis_finish(
            run_id, status="exited", exit_code=0, stdout="hi\n", timings={"wall_ms": 3.5}
        )
    with Journal.open(tmp_path) as reopened:
        done = reopened.jarvis_get(run_id)
    assert done is not None
    assert (done.status, done.exit_code, done.stdout, done.argv) == (
        "exited",
        0,
        "hi\n",
        ("/bin/echo", "hi"),
    )
    assert done.timings == {"wall_ms": 3.5}
    assert done.finished_unix_ms is not None


def test_a_denied_run_is_recorded_finished_and_cannot_be_finished_again(tmp_path: Path) -> None:
    """A denied call is stored as `denied`, already finished; a later finish writes nothing."""
    with Journal.open(tmp_path) as journal:
        run_id = journal.jarvis_begin(
            tool="jarvis.run.create",
            argv=["/bin/rm", "-rf", "/"],
            cwd="/",
            actor="tok_abcd_1234",
            decision="deny",
            matched_rule=None,
            reason="no rule matched (default deny)",
        )
        assert not journal.jarvis_finish(run_id, status="exited", exit_code=0)
        run = journal.jarvis_get(run_id)
    assert run is not None
    assert run.status == "denied"
    assert run.exit_code is None


def test_stored_output_is_capped_and_flagged_truncated(tmp_path: Path) -> None:
    """Output beyond the cap is cut and the truncated flag set, whatever the caller said."""
    with Journal.open(tmp_path) as journal:
        run_id = journal.jarvis_begin(
            tool="t", argv=["x"], cwd="/", actor="a", decision="allow", matched_rule="r", reason=""
        )
        journal.jarvis_finish(run_id, status="exited", stdout="x" * (JARVIS_OUTPUT_CAP_CHARS + 5))
        run = journal.jarvis_get(run_id)
    assert run is not None
    assert len(run.stdout) == JARVIS_OUTPUT_CAP_CHARS
    assert run.stdout_truncated
    assert not run.stderr_truncated


def test_audit_rows_come_back_newest_first_and_cannot_be_edited(tmp_path: Path) -> None:
    """The audit trail lists newest first and refuses UPDATE and DELETE."""
    with Journal.open(tmp_path) as journal:
        for outcome in ("denied", "exited 0"):
            journal.audit(
                actor="tok_abcd_1234",
                tool="jarvis.run.create",
                argv=["/bin/true"],
                cwd="/",
                decision="allow",
                matched_rule="true",
                outcome=outcome,
            )
        rows = journal.audit_rows(limit=10)
    assert [r.outcome for r in rows] == ["exited 0", "denied"]
    assert rows[0].argv == ("/bin/true",)
    raw = sqlite3.connect(tmp_path / "journal.sqlite3")
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            raw.execute("UPDATE audit SET outcome = 'forged'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            raw.execute("DELETE FROM audit")
    finally:
        raw.close()


def test_a_runs_detail_is_kept_with_its_end(tmp_path: Path) -> None:
    """The detail written with a run's end comes back after the journal is reopened."""
    with Journal.open(tmp_path) as journal:
        run_id = journal.jarvis_begin(
            tool="t", argv=["x"], cwd="", actor="a", decision="allow", matched_rule="r", reason=""
        )
        journal.jarvis_finish(run_id, status="failed", detail="cancelled: the server shut down")
    with Journal.open(tmp_path) as reopened:
        run = reopened.jarvis_get(run_id)
    assert run is not None
    assert (run.status, run.detail) == ("failed", "cancelled: the server shut down")


def test_runs_recorded_before_details_were_kept_read_back_without_one(tmp_path: Path) -> None:
    """A version 4 journal's jarvis rows are migrated as they were, their detail None."""
    raw = sqlite3.connect(tmp_path / "journal.sqlite3", isolation_level=None)
    try:
        for step in (schema._V1, schema._V2, schema._V3, schema._V4):
            for statement in schema._statements(step):
                raw.execute(statement)
        raw.execute(
            "INSERT INTO jarvis_runs (tool, argv, cwd, actor, decision, matched_rule, reason,"
            " status, owner_pid, owner_start, boot_id, created_unix_ms, finished_unix_ms)"
            " VALUES ('t', '[\"x\"]', '', 'a', 'allow', 'r', '', 'failed', 1, 1, 'b', 1, 2)"
        )
        raw.execute("PRAGMA user_version = 4")
    finally:
        raw.close()
    with Journal.open(tmp_path) as journal:
        assert journal.settings()["user_version"] == schema.SCHEMA_VERSION
        run = journal.jarvis_get(1)
    assert run is not None
    assert (run.status, run.argv, run.detail) == ("failed", ("x",), None)


def test_a_runs_executable_is_kept_and_rows_from_before_it_read_back_without_one(
    tmp_path: Path,
) -> None:
    """The file an allowed run executes is kept; a version 6 journal's rows have None."""
    raw = sqlite3.connect(tmp_path / "journal.sqlite3", isolation_level=None)
    try:
        for step in schema._STEPS[:6]:
            for statement in schema._statements(step):
                raw.execute(statement)
        raw.execute(
            "INSERT INTO jarvis_runs (tool, argv, cwd, actor, decision, matched_rule, reason,"
            " status, owner_pid, owner_start, boot_id, created_unix_ms, finished_unix_ms)"
            " VALUES ('t', '[\"x\"]', '', 'a', 'allow', 'r', '', 'exited', 1, 1, 'b', 1, 2)"
        )
        raw.execute("PRAGMA user_version = 6")
    finally:
        raw.close()
    with Journal.open(tmp_path) as journal:
        assert journal.settings()["user_version"] == schema.SCHEMA_VERSION
        run_id = journal.jarvis_begin(
            tool="t",
            argv=["x"],
            cwd="",
            actor="a",
            decision="allow",
            matched_rule="r",
            reason="",
            executable="/usr/bin/x",
        )
    with Journal.open(tmp_path) as reopened:
        older, newer = reopened.jarvis_get(1), reopened.jarvis_get(run_id)
    assert older is not None and newer is not None
    assert (older.executable, newer.executable) == (None, "/usr/bin/x")
