"""`jigcmd prune`: closed operations lose their evidence and resources, keep a tombstone.

Driven through the CLI's `main` on a journal written as servers write it; the replay of a
pruned operation by real servers is in tests/lifetime/test_prune_replay.py.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from jigcmd.cli import main
from jigcmd.durable.replay import replay
from jigcmd.durable.runresources import KINDS, RunResources
from jigcmd.durable.statedir import prepare_state_dir
from jigcmd.errors import Code, JigError
from jigcmd.frontends.diagnosis import statecheck
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal
from jigcmd.optionvalues import retain

RUN = "run-a"
STATEMENT = b"statement" * 100
# Every operation of these tests closed (or was kept) before this many seconds ago.
AGE_S = 3 * 86_400


def _new(operation_id: str, envelope: str) -> NewRow:
    return NewRow(
        root_run=RUN,
        operation_id=operation_id,
        signature="sig",
        context="session",
        deadline_unix_ms=1_900_000_000_000,
        run_id=envelope,
    )


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A done operation with a statement, an uncertain one, an open one; a jarvis run."""
    return populated(tmp_path / "state")


def populated(path: Path, stdout: bytes = b"stdout bytes") -> Path:
    """`state` at `path`: what each closed and the open operation keeps, `stdout` as its stream."""
    directory = prepare_state_dir(path)
    with Journal.open(directory) as journal:
        journal.begin(_new("op-done", "a" * 16))
        journal.finish(
            "op-done",
            root_run=RUN,
            outcome="evidence",
            result=b'{"exitCode": 0}',
            report=None,
            cleanup_complete=True,
            attestation=STATEMENT,
        )
        journal.begin(_new("op-uncertain", "b" * 16))
        journal.mark_uncertain("op-uncertain", root_run=RUN, reason="fenced", cleanup_complete=True)
        journal.begin(_new("op-open", "c" * 16))
        run = journal.jarvis_begin(
            tool="ls", argv=["ls"], cwd="/", actor="a", decision="allow", matched_rule=None,
            reason="allowed",
        )  # fmt: skip
        journal.jarvis_finish(run, status="exited", exit_code=0, stdout="x" * 1000)
        journal.audit(
            actor="a", tool="ls", argv=["ls"], cwd="/", decision="allow", matched_rule=None,
            outcome="exited",
        )  # fmt: skip
    resources = RunResources(directory)
    name = next(iter(KINDS))
    for operation_id in ("op-done", "op-open"):
        resources.keep(RUN, operation_id, [(name, stdout)])
    _age(directory)
    return directory


def _age(directory: Path) -> None:
    """Make every closed row and kept file look `AGE_S` old, as if the test had waited."""
    with Journal.open(directory) as journal:
        db = journal._db  # the test backdates what only time would change
        with db.write() as conn:
            conn.execute(
                "UPDATE operations SET finished_unix_ms = finished_unix_ms - ?"
                " WHERE finished_unix_ms IS NOT NULL",
                (AGE_S * 1000,),
            )
            conn.execute(
                "UPDATE jarvis_runs SET finished_unix_ms = finished_unix_ms - ?,"
                " created_unix_ms = created_unix_ms - ?",
                (AGE_S * 1000, AGE_S * 1000),
            )
    for path in sorted((directory / "resources").rglob("*"), reverse=True):
        stat = path.stat()
        os.utime(path, (stat.st_atime - AGE_S, stat.st_mtime - AGE_S))


def _prune(state: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    argv = ["prune", "--state-dir", str(state), "--older-than", "2d", "--json", *extra]
    assert main(argv) == 0
    answer: dict[str, object] = json.loads(capsys.readouterr().out)
    return answer


def _row_answer(state: Path, operation_id: str) -> JigError | object:
    with Journal.open_read_only(state) as journal:
        row = journal.get(operation_id, root_run=RUN)
    assert row is not None
    try:
        return replay(row)
    except JigError as error:
        return error


def test_prune_tombstones_closed_operations_and_leaves_open_ones(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Done and uncertain rows answer the pruned refusal from now on; the open row is as it was."""
    with Journal.open_read_only(state) as journal:
        open_before = journal.get("op-open", root_run=RUN)
    answer = _prune(state, capsys)
    assert (answer["operations"], answer["jarvisRuns"], answer["dryRun"]) == (2, 1, False)
    assert isinstance(answer["journalBytesRemoved"], int) and answer["journalBytesRemoved"] > 1900
    for operation_id, ending in (("op-done", "evidence"), ("op-uncertain", "UNCERTAIN")):
        error = _row_answer(state, operation_id)
        assert isinstance(error, JigError) and error.code == Code.UNAVAILABLE
        assert error.message.startswith(f"operation {operation_id!r} of run {RUN!r} was pruned on")
        assert error.message.endswith("; its evidence is gone; it is not run again")
        assert error.recorded and error.details is not None
        pruned = error.details["pruned"]
        assert pruned["ending"] == ending
    done = _row_answer(state, "op-done")
    assert isinstance(done, JigError) and done.details is not None
    assert done.details["pruned"]["exitCode"] == 0
    assert done.details["pruned"]["statementSha256"] == hashlib.sha256(STATEMENT).hexdigest()
    with Journal.open_read_only(state) as journal:
        assert journal.get("op-open", root_run=RUN) == open_before
        assert journal.jarvis_get(1) is None
        assert len(journal.audit_rows()) == 1  # the audit trail is kept


def test_prune_removes_kept_resources_but_an_open_operations(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = _prune(state, capsys)
    assert answer["resourceOperations"] == 1 and answer["resourceScopes"] == 0
    name = next(iter(KINDS))
    kept = RunResources(state)
    assert kept.read(RUN, f"jigcmd://run/{RUN}/op-open/{name}")[0] == b"stdout bytes"
    (left,) = (path for path in (state / "resources").rglob("*") if path.is_file())
    assert kept.size() == left.stat().st_size


def test_a_scope_with_nothing_left_is_removed_whole(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once its open operation closed and aged too, the run's resource scope goes."""
    with Journal.open(state) as journal:
        journal.finish(
            "op-open", root_run=RUN, outcome="evidence", result=b"{}", report=None,
            cleanup_complete=True,
        )  # fmt: skip
    _age(state)
    answer = _prune(state, capsys)
    assert (answer["operations"], answer["resourceOperations"], answer["resourceScopes"]) == (
        3,
        2,
        1,
    )
    assert list((state / "resources").iterdir()) == []


def test_a_dry_run_says_what_it_would_remove_and_removes_nothing(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Journal.open_read_only(state) as journal:
        before = journal.rows()
    files = sorted((state / "resources").rglob("*"))
    answer = _prune(state, capsys, "--dry-run")
    assert (answer["dryRun"], answer["operations"], answer["jarvisRuns"]) == (True, 2, 1)
    assert answer["resourceOperations"] == 1
    with Journal.open_read_only(state) as journal:
        assert journal.rows() == before
        assert journal.jarvis_get(1) is not None
    assert sorted((state / "resources").rglob("*")) == files


def test_prune_is_idempotent_and_says_so_in_words(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _prune(state, capsys)
    with Journal.open_read_only(state) as journal:
        tombstones = journal.rows()
    assert main(["prune", "--state-dir", str(state), "--older-than", "2d"]) == 0
    out = capsys.readouterr().out
    assert "pruned 0 operation(s) closed before" in out
    assert "pruned 0 jarvis run(s) (the jarvis audit trail is kept)" in out
    assert "keeps its size" in out
    with Journal.open_read_only(state) as journal:
        assert journal.rows() == tombstones


def test_what_closed_within_the_bound_is_kept(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["prune", "--state-dir", str(state), "--older-than", "4d", "--json"]
    assert main(argv) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["operations"], answer["jarvisRuns"], answer["resourceOperations"]) == (0, 0, 0)
    with Journal.open_read_only(state) as journal:
        row = journal.get("op-done", root_run=RUN)
    assert row is not None and not row.pruned and row.result == b'{"exitCode": 0}'


@pytest.mark.parametrize("duration", ["7", "7x", "d", "-1d", "1.5h", ""])
def test_a_duration_not_in_the_form_is_refused_naming_it(
    duration: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = prepare_state_dir(tmp_path / "state")
    assert main(["prune", "--state-dir", str(state), f"--older-than={duration}"]) == 2
    err = capsys.readouterr().err
    assert f"argument --older-than: {duration!r} is not a duration" in err
    assert "s, m, h, d or w (7d, 12h, 90m)" in err


def test_every_example_the_retain_refusal_names_is_a_retention_it_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--retain` is at least an hour: the form's examples it names must each pass it."""
    state = prepare_state_dir(tmp_path / "state")
    binding = ["--binding", str(tmp_path / "binding.toml")]
    assert main(["serve", "--state-dir", str(state), "--retain=7", *binding]) == 2
    err = capsys.readouterr().err
    assert "argument --retain: '7' is not a duration" in err
    examples = err.split("s, m, h, d or w (", 1)[1].split(")", 1)[0].split(", ")
    assert examples
    for example in examples:
        assert retain(example) >= 3600, example


def test_a_state_dir_that_does_not_exist_is_exit_2_and_none_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / "stat-dir"
    assert main(["prune", "--state-dir", str(typo), "--older-than", "7d"]) == 2
    assert f"--state-dir {typo}: no such directory" in capsys.readouterr().err
    assert not typo.exists()


def test_a_state_dir_link_loop_is_worded_as_doctor_and_serve_word_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not as a missing directory: the fix for a loop is not a typo in the path."""
    loop = tmp_path / "state"
    loop.symlink_to(loop)
    assert main(["prune", "--state-dir", str(loop), "--older-than", "7d"]) == 2
    err = capsys.readouterr().err
    assert "too many symbolic links on its path" in err
    assert "no such directory" not in err


def test_runs_and_attest_say_an_operation_was_pruned(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _prune(state, capsys)
    assert main(["runs", "--state-dir", str(state)]) == 0
    out = capsys.readouterr().out
    assert "op-done  done  ending evidence (pruned)" in out
    assert main(["attest", "--state-dir", str(state), "--run-id", RUN, "op-done"]) == 1
    assert "has no statement: it was pruned on " in capsys.readouterr().err


def test_doctor_points_at_prune_past_its_threshold(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state line always says the sizes; past the threshold it warns and names the fix."""
    check = statecheck.journal_check(state)  # one check, not the whole host
    assert (
        check.status == "ok" and "journal 0." in check.detail and "kept resources" in check.detail
    )
    monkeypatch.setattr(statecheck, "LARGE_STATE_BYTES", 1)
    check = statecheck.journal_check(state)
    assert check.status == "warn" and "grows with every call" in check.detail
    assert check.hint is not None and f"jigcmd prune --state-dir {state}" in check.hint


def test_prune_removes_only_what_jigcmd_named_and_never_through_a_link(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scope that is a link to a directory elsewhere is not entered, and an old file of
    another name beside jigcmd's is not jigcmd's: both stay, however old."""
    outside = tmp_path / "outside"
    (outside / "victim").mkdir(parents=True)
    precious = outside / "victim" / ("f" * 32)
    precious.write_text("precious\n")
    foreign = state / "resources" / "notes.txt"
    foreign.write_text("an operator's\n")
    (state / "resources" / ("a" * 32)).symlink_to(outside / "victim")
    for path in (precious, foreign):
        os.utime(path, (0, 0))
    answer = _prune(state, capsys)
    assert answer["resourceOperations"] == 1
    assert precious.read_text() == "precious\n"
    assert foreign.read_text() == "an operator's\n"
    assert (state / "resources" / ("a" * 32)).is_symlink()


@pytest.mark.parametrize("verb", ["prune", "serve"])
def test_a_duration_past_the_longest_is_refused_naming_the_limit(
    verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2000 weeks: refused where it is given (`--older-than`, `--retain`), never passed on to
    an hourly prune that would refuse it each time."""
    state = prepare_state_dir(tmp_path / "state")
    option = "--older-than" if verb == "prune" else "--retain"
    argv = [verb, "--state-dir", str(state), f"{option}=2000w"]
    if verb == "serve":
        argv += ["--binding", str(tmp_path / "binding.toml")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"argument {option}: '2000w' is longer than the longest duration, 999,999,999 s" in err


def test_a_dry_run_on_an_older_journal_names_the_verbs_that_bring_it_up_to_date(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Status 2, and no "let a verb that writes": prune writes, without --dry-run."""
    with Journal.open(state) as journal, journal._db.write() as conn:
        conn.execute("PRAGMA user_version = 5")  # as an older jigcmd left it
    argv = ["prune", "--state-dir", str(state), "--older-than", "2d", "--dry-run"]
    assert main(argv) == 2
    said = capsys.readouterr().err
    assert said.startswith("jigcmd prune: the journal is at schema version 5, older than")
    assert "a verb that only reads it (runs, attest, doctor, jarvis-audit, prune --dry-run)" in said
    assert "fix: bring it up to date once with `jigcmd recover --state-dir` this directory" in said
    assert "`jigcmd prune` without --dry-run also does" in said
