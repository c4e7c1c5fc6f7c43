"""`jigcmd attest` and `verify` as a person types them: nothing created, no partial evidence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from jigcmd.durable.statedir import prepare_state_dir
from jigcmd.evidence import Evidence, StreamText
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal
from tests.faults.disk import required_disk

EVIDENCE = Evidence(
    candidate_digest="sha256:" + "0" * 64,
    command="tests",
    invocation=["bun", "test", "test/a.test.ts"],
    stdin_digest="sha256:" + "1" * 64,
    stdout=StreamText(text="", truncated=False),
    stderr=StreamText(text="1 pass\n", truncated=False),
    exit_code=0,
    signal=None,
    stop_reason="exited",
    cleanup="complete",
)


def jigcmd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True, text=True, timeout=120, check=False, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def attest(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return jigcmd("attest", "--run-id", "run-1", "op-1", *args, env=env)


def test_a_state_directory_that_does_not_exist_is_status_2_and_not_created(
    tmp_path: Path,
) -> None:
    """A typo is status 2 naming it; before, it was created with a fresh journal."""
    typo = tmp_path / "stat"
    done = attest("--state-dir", str(typo))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"jigcmd attest: --state-dir {typo}: no such directory")
    assert done.stdout == ""
    assert not typo.exists()


@pytest.mark.parametrize("run_id", ["", "has space"])
def test_a_run_id_outside_the_grammar_is_a_usage_error_naming_the_rule(
    tmp_path: Path, run_id: str
) -> None:
    """`--run-id "$RUN"` with RUN unset: status 2 and the grammar, not "no operation of run ''"."""
    state = prepare_state_dir(tmp_path / "state")
    done = jigcmd("attest", "--run-id", run_id, "op-1", "--state-dir", str(state))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"jigcmd attest: --run-id {run_id!r} must match [A-Za-z0-9][A-Za-z0-9._:/-]* "
        "(1-128 bytes): the run id `serve` was given or printed\n"
    )
    assert os.listdir(state) == []


def test_a_default_state_directory_not_made_yet_has_no_such_operation(tmp_path: Path) -> None:
    """No --state-dir and none made yet: status 1, no such operation, nothing created."""
    default = tmp_path / "state"
    done = attest(env={**os.environ, "JIGCMD_STATE_DIR": str(default)})
    assert done.returncode == 1, done.stderr
    assert done.stderr == f"jigcmd attest: no operation 'op-1' of run 'run-1' in {default}\n"
    assert not default.exists()


def test_a_state_directory_without_a_journal_gets_none(tmp_path: Path) -> None:
    """An empty state directory: status 1, no such operation, and still no journal in it."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    done = attest("--state-dir", str(state))
    assert done.returncode == 1, done.stderr
    assert "no operation 'op-1' of run 'run-1'" in done.stderr
    assert list(state.iterdir()) == []


def test_a_statement_is_read_from_a_state_directory_on_a_read_only_mount(
    tmp_path: Path,
) -> None:
    """A surviving state directory mounted read-only: the statement kept, status 0."""
    statement = b'{"payloadType":"application/vnd.in-toto+json"}'
    with required_disk() as disk:
        with Journal.open(prepare_state_dir(disk.path)) as journal:
            new = NewRow(
                root_run="run-1",
                operation_id="op-1",
                signature="s",
                context="c",
                deadline_unix_ms=0,
                run_id="a" * 16,
            )
            journal.begin(new)
            journal.finish(
                "op-1",
                root_run="run-1",
                outcome="evidence",
                result=b"{}",
                report=None,
                cleanup_complete=True,
                attestation=statement,
            )
        disk.read_only()
        done = attest("--state-dir", str(disk.path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.encode() == statement


@pytest.mark.parametrize("field", sorted(msgspec.to_builtins(EVIDENCE)))
def test_verify_refuses_evidence_missing_any_of_the_ten_fields(tmp_path: Path, field: str) -> None:
    """`cleanup` included: status 2, "not jigcmd evidence", the field named; nothing checked."""
    (tmp_path / "state").mkdir()
    key = jigcmd("key", "--state-dir", str(tmp_path / "state"))
    assert key.returncode == 0, key.stderr
    (tmp_path / "host.pub").write_text(key.stdout)
    # An envelope in shape, its signature never checked: what is refused is the other file.
    (tmp_path / "bundle.jsonl").write_text(
        '{"payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": []}\n'
    )
    partial = dict(msgspec.to_builtins(EVIDENCE))
    del partial[field]
    (tmp_path / "evidence.json").write_text(json.dumps(partial))
    done = jigcmd(
        "verify", str(tmp_path / "bundle.jsonl"), "--key", str(tmp_path / "host.pub"),
        "--evidence", str(tmp_path / "evidence.json"),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert f"not jigcmd evidence: Object missing required field `{field}`" in done.stderr
