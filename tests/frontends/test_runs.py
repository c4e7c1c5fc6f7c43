"""`jigcmd runs`: a state directory's runs and operations, read only, as text and JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.cli import main
from jigcmd.durable.statedir import StateDirError, prepare_state_dir
from jigcmd.frontends.diagnosis.statecheck import journal_check
from jigcmd.frontends.runs import list_runs
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import DB_NAME, Journal
from tests.faults.disk import required_disk
from tests.killedserver import kill_a_server_mid_run


def _new(run: str, operation_id: str, envelope: str, trace: str | None = None) -> NewRow:
    return NewRow(
        root_run=run,
        operation_id=operation_id,
        signature="sig",
        context="session",
        deadline_unix_ms=1_900_000_000_000,
        run_id=envelope,
        trace=trace,
    )


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A state directory with two runs: a done, a failed and an uncertain operation."""
    return _recorded(tmp_path / "state")


def _recorded(directory: Path) -> Path:
    directory = prepare_state_dir(directory)
    with Journal.open(directory) as journal:
        trace = '{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}'
        journal.begin(_new("run-a", "op-1", "a" * 16, trace))
        journal.finish(
            "op-1",
            root_run="run-a",
            outcome="evidence",
            result=b"{}",
            report=None,
            cleanup_complete=True,
        )
        journal.begin(_new("run-a", "op-2", "b" * 16))
        journal.finish(
            "op-2",
            root_run="run-a",
            outcome="failure",
            result=b'{"code":"CANCELLED","message":"cancelled"}',
            report=None,
            cleanup_complete=True,
        )
        journal.begin(_new("run-b", "task-1", "c" * 16))
        journal.mark_uncertain("task-1", root_run="run-b", reason="fenced", cleanup_complete=True)
    return directory


def test_runs_lists_each_operation_by_run(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--state-dir", str(state)]) == 0
    out = capsys.readouterr().out
    assert "run run-a: 2 operation(s)" in out and "run run-b: 1 operation(s)" in out
    assert "op-2  done  ending CANCELLED  cleanup complete" in out
    assert "task-1  uncertain  ending UNCERTAIN" in out


def test_runs_json_is_one_object_per_run(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--state-dir", str(state), "--json", "--run-id", "run-a"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    run = json.loads(line)
    assert run["runId"] == "run-a"
    first, second = run["operations"]
    assert (first["operationId"], first["state"], first["ending"]) == ("op-1", "done", "evidence")
    assert first["trace"] == {
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    }
    assert (second["ending"], second["envelope"], second["trace"]) == ("CANCELLED", "b" * 16, None)
    assert first["created"].endswith("Z") and first["finished"].endswith("Z")


def test_runs_changes_nothing(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No journal is "no runs" and creates none; an existing one keeps every record as it was."""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["runs", "--state-dir", str(empty)]) == 0
    assert capsys.readouterr().out == "no runs\n"
    assert list(empty.iterdir()) == []
    before = list_runs(state)
    assert main(["runs", "--state-dir", str(state), "--json"]) == 0
    assert list_runs(state) == before
    # Opened and closed like any jigcmd: the next open finds the journal whole.
    with Journal.open(state) as journal:
        assert len(journal.rows()) == 3


def test_an_unreadable_journal_is_exit_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = prepare_state_dir(tmp_path / "broken")
    (broken / DB_NAME).write_bytes(b"not a database, but a file of the journal's name" * 20)
    assert main(["runs", "--state-dir", str(broken)]) == 2
    assert DB_NAME in capsys.readouterr().err


def test_a_state_dir_that_does_not_exist_is_exit_2_and_none_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped `--state-dir` is not "no runs": it is named, and nothing is created."""
    typo = tmp_path / "stat-dir"
    assert main(["runs", "--state-dir", str(typo)]) == 2
    assert f"state directory {typo} does not exist" in capsys.readouterr().err
    assert not typo.exists()


def test_a_state_dir_others_may_write_is_exit_2_naming_the_fix(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its journal could be anyone's: refused as `attest` and `jarvis-audit` refuse it."""
    state.chmod(0o777)
    assert main(["runs", "--state-dir", str(state)]) == 2
    assert f"chmod 700 {state}" in capsys.readouterr().err


def test_runs_reads_a_state_directory_on_a_read_only_mount(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A surviving state directory mounted read-only (its node lost): listed, status 0."""
    with required_disk() as disk:
        _recorded(disk.path)
        disk.read_only()
        assert main(["runs", "--state-dir", str(disk.path)]) == 0
    out = capsys.readouterr().out
    assert "run run-a: 2 operation(s)" in out and "task-1  uncertain" in out


def test_an_operation_whose_server_was_killed_says_recover_fences_it_and_nothing_changes(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not plain `running`: its owner is provably dead. A live owner's open row is plain."""
    kill_a_server_mid_run(state)
    with Journal.open(state) as journal:  # this process: alive
        journal.begin(_new("run-k", "op-live", "e" * 16))
    live_files = sorted(os.listdir(state / "live"))
    assert main(["runs", "--state-dir", str(state), "--run-id", "run-k"]) == 0
    out = capsys.readouterr().out
    assert "op-killed  running (owner gone; `jigcmd recover` fences it)  ending -" in out
    assert "op-live  dispatching  ending -" in out
    assert main(["runs", "--state-dir", str(state), "--run-id", "run-k", "--json"]) == 0
    views = json.loads(capsys.readouterr().out)["operations"]
    assert [(v["operationId"], v["state"], v["ownerGone"]) for v in views] == [
        ("op-killed", "running", True),
        ("op-live", "dispatching", False),
    ]
    check = journal_check(state)
    assert check.status == "warn", check
    assert "1 of them left open by a server that is gone: op-killed" in check.detail
    assert check.hint == (
        f"run `jigcmd recover --state-dir {state}`: it fences their runs and closes them"
    )
    # Read only: the dead server's liveness file is left for recovery, the row still open.
    assert sorted(os.listdir(state / "live")) == live_files
    row = next(row for row in list_runs(state) if row.operation_id == "op-killed")
    assert row.state == "running"


def test_a_journal_of_jarvis_runs_alone_points_to_jarvis_audit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """jarvis's runs are not `runs`' to list: it says where they are instead of "no runs"."""
    directory = prepare_state_dir(tmp_path / "state")
    with Journal.open(directory) as journal:
        run_id = journal.jarvis_begin(
            tool="jarvis.run.create", argv=["echo", "x"], cwd="", actor="tok_jarvis_abcd",
            decision="allow", matched_rule="echo", reason="allowed by rule 'echo'",
            executable="/usr/bin/echo",
        )  # fmt: skip
        journal.audit(
            actor="tok_jarvis_abcd", tool="jarvis.run.create", argv=["echo", "x"], cwd="",
            decision="allow", matched_rule="echo", outcome=f"started run {run_id}",
        )  # fmt: skip
    assert main(["runs", "--state-dir", str(directory)]) == 0
    assert capsys.readouterr().out == (
        "no Project Command runs; jarvis runs: jigcmd jarvis-audit\n"
    )
    assert main(["runs", "--state-dir", str(directory), "--run-id", "r9"]) == 0
    assert capsys.readouterr().out == "no run r9\n"


def test_a_fifo_among_the_slot_files_warns_and_the_runs_are_still_listed(state: Path) -> None:
    """`runs` never opens a slot file: it lists, and says on stderr what serve refuses."""
    (state / "slots").mkdir(mode=0o700)
    os.mkfifo(state / "slots" / "slot-0", 0o600)
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "runs", "--state-dir", str(state)],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "run run-a: " in done.stdout
    with pytest.raises(StateDirError) as refused:
        prepare_state_dir(state)
    assert done.stderr == f"jigcmd runs: warning: {refused.value}; serve and run refuse to start\n"
    assert (state / "slots" / "slot-0").is_fifo()
