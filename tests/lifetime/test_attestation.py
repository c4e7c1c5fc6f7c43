"""Each completed run's signed statement, end to end through real `jigcmd` processes.

`jigcmd run --json` and `jigcmd serve` (FLOW Run/1) make it; `jigcmd attest` fetches it from
the journal; `jigcmd key` prints the key; securesystemslib (an independent DSSE + Ed25519
implementation) and `jigcmd verify` check it; a kill -9 leaves no statement for a run whose
end nobody saw; a refusal and a key that cannot be read get none either.
"""

from __future__ import annotations

import base64
import json
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
from tests.lifetime.candidates import LINGER, QUICK, SPIN, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig
from tests.lifetime.watch import alive, wait_for

pytestmark = pytest.mark.envelope

CANDIDATES = Path(jigcmd.__file__).parent / "example" / "candidates"


def _jigcmd(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _run_json(
    rig: Rig, command: str, files: Path, *extra: str
) -> subprocess.CompletedProcess[bytes]:
    return _jigcmd(
        "run",
        "--binding",
        str(rig.binding),
        "--state-dir",
        str(rig.state_dir),
        command,
        "--files",
        str(files),
        "--json",
        *extra,
    )


def _independently_verified(bundle: bytes, state_dir: Path) -> list[dict[str, Any]]:
    """Every envelope verified by securesystemslib with the key `jigcmd key` prints."""
    printed = _jigcmd("key", "--state-dir", str(state_dir))
    assert printed.returncode == 0, printed.stderr
    public = serialization.load_pem_public_key(printed.stdout)
    statements = []
    for line in bundle.decode().splitlines():
        envelope = Envelope.from_dict(json.loads(line))
        keyid = envelope.signatures[next(iter(envelope.signatures))].keyid
        envelope.verify([SSlibKey.from_crypto(public, keyid=keyid)], 1)
        statements.append(json.loads(base64.b64decode(json.loads(line)["payload"])))
    return statements


def _verify(rig: Rig, bundle: Path, *extra: str) -> subprocess.CompletedProcess[bytes]:
    return _jigcmd("verify", str(bundle), "--state-dir", str(rig.state_dir), *extra)


def test_a_run_json_statement_verifies_independently_and_with_jigcmd_verify(
    rig: Rig, tmp_path: Path
) -> None:
    """The test command's bundle: two statements, both verified; jigcmd verify says so."""
    done = _run_json(rig, "tests", CANDIDATES / "failing")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    # A test command also carries its per-test results (`tests`).
    assert set(answer) == {"evidence", "report", "attestation", "tests"}
    assert len(answer["evidence"]) == 10
    attestation = answer["attestation"]
    bundle = attestation["bundle"].encode()
    run, tests = _independently_verified(bundle, rig.state_dir)
    assert run["subject"][0]["digest"]["sha256"] == answer["evidence"]["candidateDigest"][7:]
    assert run["predicate"]["ending"]["exitCode"] == answer["evidence"]["exitCode"] == 1
    assert tests["predicate"]["result"] == "FAILED"
    assert tests["predicate"]["failedTests"] == ["test/project.test.ts > value"]
    # `run --json` has Bun write its JUnit report: the names come from it, marked as such.
    (report,) = [c for c in tests["predicate"]["configuration"] if "annotations" in c]
    assert report["name"] == "test runner report (bun test JUnit report)"
    assert report["annotations"]["candidateInfluenced"] is True
    (tmp_path / "bundle.jsonl").write_bytes(bundle)
    (tmp_path / "evidence.json").write_text(json.dumps(answer["evidence"]))
    checked = _verify(rig, tmp_path / "bundle.jsonl", "--evidence", str(tmp_path / "evidence.json"))
    assert checked.returncode == 0, checked.stdout
    lines = checked.stdout.decode().splitlines()
    assert lines[-1] == "verified"
    assert {line.split(":")[0] for line in lines[:-1]} >= {
        "ok   signature",
        "ok   schema",
        "ok   candidate",
        "ok   stdout",
        "ok   stderr",
    }


def _one_byte_changed(bundle: bytes, where: str) -> bytes:
    first, *rest = bundle.decode().splitlines()
    envelope = json.loads(first)
    if where == "payload":
        body = bytearray(base64.b64decode(envelope["payload"]))
        body[len(body) // 2] ^= 0x01
        envelope["payload"] = base64.b64encode(bytes(body)).decode()
    else:
        sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
        sig[0] ^= 0x01
        envelope["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    return ("\n".join([json.dumps(envelope), *rest]) + "\n").encode()


@pytest.mark.parametrize("where", ["payload", "signature", "evidence"])
def test_one_byte_changed_fails_jigcmd_verify_with_the_reason(
    rig: Rig, tmp_path: Path, where: str
) -> None:
    """A changed payload, signature or evidence byte: exit 1, the failed check named."""
    done = _run_json(rig, "tests", CANDIDATES / "passing")
    answer = json.loads(done.stdout)
    bundle = answer["attestation"]["bundle"].encode()
    evidence = json.dumps(answer["evidence"]).encode()
    if where == "evidence":
        # One character of the captured stdout text, as a tamperer would edit the file.
        evidence = evidence.replace(b"bun test", b"bun tesT", 1)
    else:
        bundle = _one_byte_changed(bundle, where)
    (tmp_path / "b.jsonl").write_bytes(bundle)
    (tmp_path / "e.json").write_bytes(evidence)
    checked = _verify(rig, tmp_path / "b.jsonl", "--evidence", str(tmp_path / "e.json"))
    assert checked.returncode == 1, checked.stdout
    out = checked.stdout.decode()
    failed = "FAIL stdout:" if where == "evidence" else "FAIL signature: envelope 1: no signature"
    assert failed in out and out.endswith("NOT verified\n")


def test_a_run1_call_keeps_its_evidence_and_jigcmd_attest_fetches_the_statement(
    rig: Rig, tmp_path: Path
) -> None:
    """Run/1 evidence is the ten fields; the statement comes from the journal and verifies."""
    server = rig.serve()
    token = f"tok-{uuid.uuid4().hex}"
    server.send(flow_call("c1", "op-attest", cli_input(QUICK, token)))
    value = server.answer("c1")["result"]["value"]
    assert server.close_input() == 0
    assert set(value) == {
        "candidateDigest",
        "command",
        "invocation",
        "stdinDigest",
        "stdout",
        "stderr",
        "exitCode",
        "signal",
        "stopReason",
        "cleanup",
    }
    out = tmp_path / "statement.jsonl"
    fetched = _jigcmd(
        "attest",
        "--run-id",
        rig.run_id,
        "op-attest",
        "--out",
        str(out),
        "--state-dir",
        str(rig.state_dir),
    )
    assert fetched.returncode == 0, fetched.stderr
    (run,) = _independently_verified(out.read_bytes(), rig.state_dir)
    assert run["predicate"]["run"]["operationId"] == "op-attest"
    assert run["predicate"]["run"]["callerRun"] == rig.run_id
    assert run["predicate"]["ending"]["cleanup"] == "complete"
    (tmp_path / "evidence.json").write_text(json.dumps(value))
    checked = _verify(rig, out, "--evidence", str(tmp_path / "evidence.json"))
    assert checked.returncode == 0, checked.stdout
    printed = _jigcmd(
        "attest", "--run-id", rig.run_id, "op-attest", "--state-dir", str(rig.state_dir)
    )
    assert printed.stdout == out.read_bytes()
    rig.assert_nothing_left()


def test_a_refusal_and_an_unknown_operation_have_no_statement(rig: Rig) -> None:
    """Invalid input runs nothing and keeps no row: attest says there is no such operation."""
    server = rig.serve()
    server.send(flow_call("bad", "op-refused", {"command": "no-such-command", "files": {}}))
    assert "error" in server.answer("bad")
    assert server.close_input() == 0
    fetched = _jigcmd(
        "attest", "--run-id", rig.run_id, "op-refused", "--state-dir", str(rig.state_dir)
    )
    assert fetched.returncode == 1 and fetched.stdout == b""
    assert b"no operation 'op-refused'" in fetched.stderr


def test_after_a_kill_mid_run_the_uncertain_operation_has_no_statement(rig: Rig) -> None:
    """kill -9 mid-run, recovery: UNCERTAIN, no statement in the journal or from attest."""
    server = rig.serve()
    token = f"tok-{uuid.uuid4().hex}"
    server.send(flow_call("c1", "op-killed", cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    wait_for(lambda: getattr(rig.row("op-killed"), "state", None) == "running", 30, "running")
    server.kill()
    wait_for(lambda: not alive(candidate), 30, "the candidate to be fenced")
    rig.recover()
    again = rig.serve()
    again.send(flow_call("c2", "op-killed", cli_input(LINGER, token)))
    assert again.answer("c2")["error"]["data"]["code"] == "UNCERTAIN"
    assert again.close_input() == 0
    row = rig.row("op-killed")
    assert row is not None and row.state == "uncertain" and row.attestation is None
    fetched = _jigcmd(
        "attest", "--run-id", rig.run_id, "op-killed", "--state-dir", str(rig.state_dir)
    )
    assert fetched.returncode == 1 and fetched.stdout == b""
    assert b"has no statement: its end is uncertain" in fetched.stderr
    rig.assert_nothing_left()


@pytest.mark.slow
def test_a_run_stopped_by_its_deadline_ran_and_has_a_statement_saying_so(
    rig: Rig, tmp_path: Path
) -> None:
    """DEADLINE_EXCEEDED with its evidence and its statement; the journal replays both."""
    files = tmp_path / "spin"
    (files / "src").mkdir(parents=True)
    (files / "src" / "cli.ts").write_text(SPIN)
    done = _run_json(rig, "cli", files, "--", "tok")
    assert done.returncode == 4, done.stderr
    answer = json.loads(done.stdout)
    assert answer["error"]["code"] == "DEADLINE_EXCEEDED"
    bundle = answer["attestation"]["bundle"].encode()
    (run,) = _independently_verified(bundle, rig.state_dir)
    assert run["predicate"]["ending"]["stopReason"] == "deadline"
    assert run["predicate"]["ending"]["signal"] == "SIGKILL"
    (tmp_path / "b.jsonl").write_bytes(bundle)
    (tmp_path / "e.json").write_text(json.dumps(answer["evidence"]))
    checked = _verify(rig, tmp_path / "b.jsonl", "--evidence", str(tmp_path / "e.json"))
    assert checked.returncode == 0, checked.stdout
    # Through serve: the failure row keeps it, and `jigcmd attest` serves it.
    server = rig.serve()
    server.send(flow_call("d1", "op-deadline", cli_input(SPIN, "tok")))
    assert server.answer("d1")["error"]["data"]["code"] == "DEADLINE_EXCEEDED"
    assert server.close_input() == 0
    fetched = _jigcmd(
        "attest", "--run-id", rig.run_id, "op-deadline", "--state-dir", str(rig.state_dir)
    )
    assert fetched.returncode == 0, fetched.stderr
    (statement,) = _independently_verified(fetched.stdout, rig.state_dir)
    assert statement["predicate"]["ending"]["stopReason"] == "deadline"


def test_a_signing_key_that_cannot_be_read_fails_the_start_with_the_reason(
    rig: Rig, tmp_path: Path
) -> None:
    """run: UNAVAILABLE naming the file and the cause, nothing ran; serve: exits at once."""
    missing = tmp_path / "missing.pem"
    done = _run_json(rig, "tests", CANDIDATES / "passing", "--signing-key", str(missing))
    assert done.returncode == 3
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "UNAVAILABLE"
    assert error["message"] == f"signing key {missing}: no such file"
    served = subprocess.run(
        [
            sys.executable,
            "-m",
            "jigcmd",
            "serve",
            "--binding",
            str(rig.binding),
            "--state-dir",
            str(rig.state_dir),
            "--signing-key",
            str(missing),
        ],
        capture_output=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert served.returncode != 0
    assert f"signing key {missing}: no such file".encode() in served.stderr


def test_verify_without_a_key_on_a_host_without_one_says_so_and_makes_nothing(
    tmp_path: Path,
) -> None:
    """No --key and no host key: exit 2 naming where it looked; no state directory appears."""
    # An envelope in shape, never checked: the missing key is said first.
    (tmp_path / "b.jsonl").write_text(
        '{"payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": []}\n'
    )
    state = tmp_path / "nowhere"
    checked = _jigcmd("verify", str(tmp_path / "b.jsonl"), "--state-dir", str(state))
    assert checked.returncode == 2
    assert f"no host key at {state}/signing-key.pub.pem".encode() in checked.stderr
    assert not state.exists()
