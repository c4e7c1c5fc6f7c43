"""`jigcmd verify` of a Run/1 answer says which run the statement is of, or that it did not check.

A Run/1 answer is the ten evidence fields: the same call under another run, another lock or
another front answers the same ones. So a statement of another run must never verify on ok
lines alone: its run and admission are `skip` lines naming the signed facts, checked when
the caller gives `--run-id`, `--operation-id` and `--lock`; and a statement no Run/1 call
can have made (`jigcmd run`'s) fails outright. An MCP call's test result is read from Bun's
JUnit report as a Run/1 call's is: only its operation tells it apart.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

import jigcmd
from tests.lifetime.candidates import QUICK, cli_input
from tests.lifetime.frames import flow_call, mcp_initialized
from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope

PASSING = Path(jigcmd.__file__).parent / "example" / "candidates" / "passing"


def _jigcmd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _attest(rig: Rig, run_id: str, operation_id: str, out: Path) -> Path:
    done = _jigcmd(
        "attest", "--run-id", run_id, operation_id, "--state-dir", str(rig.state_dir),
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


def _run_facts(bundle: Path, rig: Rig) -> dict[str, Any]:
    """The run statement's predicate, its signature checked by securesystemslib alone."""
    printed = _jigcmd("key", "--state-dir", str(rig.state_dir))
    public = serialization.load_pem_public_key(printed.stdout.encode())
    line = json.loads(bundle.read_text().splitlines()[0])
    envelope = Envelope.from_dict(line)
    keyid = envelope.signatures[next(iter(envelope.signatures))].keyid
    envelope.verify([SSlibKey.from_crypto(public, keyid=keyid)], 1)
    predicate: dict[str, Any] = json.loads(base64.b64decode(line["payload"]))["predicate"]
    return predicate


def _flow_answer(rig: Rig, run_id: str, operation_id: str, call: object, path: Path) -> Path:
    server = rig.serve(run_id=run_id)
    server.send(flow_call("c1", operation_id, call))
    answer = server.answer("c1")
    assert server.close_input() == 0
    assert "result" in answer, answer
    path.write_text(json.dumps(answer))
    return path


def _other_lock(rig: Rig, tmp_path: Path) -> Path:
    """The lock of a Binding one command apart from the rig's: another admission."""
    other = tmp_path / "other"
    shutil.copytree(rig.binding.parent, other, ignore=shutil.ignore_patterns("jigcmd.lock"))
    with (other / "binding.toml").open("a") as toml:
        toml.write('extra = { run = "src/other.ts" }\n')
    done = _jigcmd("lock", "--binding", str(other / "binding.toml"))
    assert done.returncode == 0, done.stdout + done.stderr
    return other / "jigcmd.lock"


def test_another_runs_statement_is_never_verified_on_ok_lines_alone(
    rig: Rig, tmp_path: Path
) -> None:
    """The same call under two runs: the first's statement against the second's answer says
    its run and lock unchecked, and fails once the caller names its own run or lock."""
    call = cli_input(QUICK, f"tok-{uuid.uuid4().hex}")
    _flow_answer(rig, rig.run_id, "op-same", call, tmp_path / "first.json")
    other_run = f"{rig.run_id}-b"
    second = _flow_answer(rig, other_run, "op-same", call, tmp_path / "second.json")
    bundle = _attest(rig, rig.run_id, "op-same", tmp_path / "first.jsonl")
    facts = _run_facts(bundle, rig)
    assert facts["run"]["callerRun"] == rig.run_id
    state = ("--state-dir", str(rig.state_dir))

    replayed = _jigcmd("verify", str(bundle), *state, "--evidence", str(second))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    lines = replayed.stdout.splitlines()
    run_line = next(line for line in lines if line.startswith("skip run: "))
    assert f'operation "op-same" of caller run "{rig.run_id}" is unchecked' in run_line
    assert facts["run"]["runId"] in run_line
    admission = next(line for line in lines if line.startswith("skip admission: "))
    assert facts["admission"]["lockDigest"] in admission
    assert facts["admission"]["bindingDigest"] in admission

    gate = ("--run-id", other_run, "--operation-id", "op-same")
    refused = _jigcmd("verify", str(bundle), *state, "--evidence", str(second), *gate)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert (
        f'FAIL run: the statement is of operation "op-same" of caller run "{rig.run_id}", '
        f'not --run-id "{other_run}"\n'
    ) in refused.stdout
    assert refused.stdout.endswith("NOT verified\n")

    own = ("--run-id", rig.run_id, "--operation-id", "op-same")
    lock = rig.binding.parent / "jigcmd.lock"
    held = _jigcmd(
        "verify", str(bundle), *state, "--evidence", str(second), *own, "--lock", str(lock)
    )
    assert held.returncode == 0, held.stdout + held.stderr
    assert "ok   run: " in held.stdout and "ok   admission: " in held.stdout
    assert "skip" not in held.stdout

    other = _other_lock(rig, tmp_path)
    wrong = _jigcmd("verify", str(bundle), *state, *own, "--lock", str(other))
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert f"FAIL admission: the statement differs from --lock {other} in lockDigest, " in (
        wrong.stdout
    )
    unset = _jigcmd("verify", str(bundle), *state, "--run-id", "")
    assert unset.returncode == 2
    assert unset.stderr.startswith("jigcmd verify: --run-id '' must match ")


def test_a_statement_no_run1_call_can_have_made_fails_against_a_run1_answer(
    rig: Rig, tmp_path: Path
) -> None:
    """The same `cli` call by `jigcmd run --json` (no caller run) against a Run/1 answer is
    refused; an MCP call's is said unchecked, and fails once the operation id is given."""
    token = f"tok-{uuid.uuid4().hex}"
    call = cli_input(QUICK, token)
    answer = _flow_answer(rig, rig.run_id, "op-cli", call, tmp_path / "f.json")
    state = ("--state-dir", str(rig.state_dir))
    (tmp_path / "c" / "src").mkdir(parents=True)
    (tmp_path / "c" / "src" / "cli.ts").write_text(QUICK)
    ran = _jigcmd(
        "run", "--binding", str(rig.binding), *state, "cli", "--files", str(tmp_path / "c"),
        "--json", "--", token,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (tmp_path / "run.jsonl").write_text(json.loads(ran.stdout)["attestation"]["bundle"])
    checked = _jigcmd("verify", str(tmp_path / "run.jsonl"), *state, "--evidence", str(answer))
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert (
        "FAIL run: a Run/1 answer, but the statement is a `jigcmd run`'s "
        '(operationId "(jigcmd run)", no caller run), which answers no Run/1 line: no Run/1 '
        "call made it\n"
    ) in checked.stdout

    server = mcp_initialized(rig.serve())
    params: dict[str, Any] = {"name": "cli"}
    params["arguments"] = {"files": call["files"], "args": call["args"]}
    params["_meta"] = {"dev.jigcmd/operationId": "op-mcp"}
    server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
    assert server.answer(2)["result"]["isError"] is False
    assert server.close_input() == 0
    bundle = _attest(rig, rig.run_id, "op-mcp", tmp_path / "mcp.jsonl")
    checked = _jigcmd("verify", str(bundle), *state, "--evidence", str(answer))
    # Its stderr is another run's (Bun prints each test's time): only `run` is of interest.
    assert "FAIL run" not in checked.stdout, checked.stdout + checked.stderr
    assert 'skip run: a Run/1 answer names no run, so the statement\'s operation "op-mcp" of ' in (
        checked.stdout
    )
    gate = ("--run-id", rig.run_id, "--operation-id", "op-cli")
    checked = _jigcmd("verify", str(bundle), *state, "--evidence", str(answer), *gate)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert f'FAIL run: the statement is of operation "op-mcp" of caller run "{rig.run_id}", ' in (
        checked.stdout
    )
    # The Run/1 call's own statement against its answer, all three given: nothing skipped.
    own = _attest(rig, rig.run_id, "op-cli", tmp_path / "own.jsonl")
    lock = str(rig.binding.parent / "jigcmd.lock")
    checked = _jigcmd("verify", str(own), *state, "--evidence", str(answer), *gate, "--lock", lock)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "skip" not in checked.stdout


def test_an_mcp_calls_test_result_is_told_from_a_run1_calls_by_its_operation_only(
    rig: Rig, tmp_path: Path
) -> None:
    """Every test command has Bun write its JUnit report, so an MCP call's statement reads as
    a Run/1 call's would: against a Run/1 answer its operation is a `skip`, and a failure
    once the caller names its own."""
    files = {
        str(path.relative_to(PASSING)): path.read_text()
        for path in sorted(PASSING.rglob("*"))
        if path.is_file()
    }
    call = {"command": "tests", "files": files}
    answer = _flow_answer(rig, rig.run_id, "op-tests", call, tmp_path / "f.json")
    server = mcp_initialized(rig.serve())
    params: dict[str, Any] = {"name": "tests", "arguments": {"files": files}}
    params["_meta"] = {"dev.jigcmd/operationId": "op-mcp-tests"}
    server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
    assert server.answer(2)["result"]["isError"] is False
    assert server.close_input() == 0
    bundle = _attest(rig, rig.run_id, "op-mcp-tests", tmp_path / "mcp.jsonl")
    state = ("--state-dir", str(rig.state_dir))
    checked = _jigcmd("verify", str(bundle), *state, "--evidence", str(answer))
    # Its stderr is another run's (Bun prints each test's time): only `run` is of interest.
    assert "FAIL run" not in checked.stdout, checked.stdout + checked.stderr
    assert (
        'skip run: a Run/1 answer names no run, so the statement\'s operation "op-mcp-tests"'
        in (checked.stdout)
    )
    gate = ("--run-id", rig.run_id, "--operation-id", "op-tests")
    refused = _jigcmd("verify", str(bundle), *state, "--evidence", str(answer), *gate)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert (
        f'FAIL run: the statement is of operation "op-mcp-tests" of caller run "{rig.run_id}", '
        'not --operation-id "op-tests"'
    ) in refused.stdout
