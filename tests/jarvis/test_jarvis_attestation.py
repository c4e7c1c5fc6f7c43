"""jarvis's signed run statements: `jarvis.run.get` carries one for every completed run."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

from jigcmd.attest.attester import Attester
from jigcmd.attest.keys import SigningKey
from jigcmd.attest.statement import JARVIS_PREDICATE_TYPE
from jigcmd.attest.verify import decode_evidence, verify_bundle
from jigcmd.envelope.api import EnvelopeFailure, FailureKind
from jigcmd.frontends.jarvis import jarvis
from jigcmd.jarvis.statements import RunSigning
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import (
    ACTOR,
    POLICY,
    TOKEN,
    SpyExecutor,
    auth,
    harness,
    invoke_body,
    make_service,
)

POLICY_DIGEST = "sha256:" + "9" * 64


@pytest.fixture
def signing() -> RunSigning:
    return RunSigning(Attester(SigningKey(Ed25519PrivateKey.generate(), "test")), POLICY_DIGEST)


def _statement(attestation: dict[str, Any]) -> dict[str, Any]:
    (line,) = attestation["bundle"].splitlines()
    found: dict[str, Any] = json.loads(base64.b64decode(json.loads(line)["payload"]))
    return found


async def test_a_completed_run_carries_a_statement_that_verifies(signing: RunSigning) -> None:
    """run.get: the bundle verifies (securesystemslib and jigcmd's checks, with the record)."""
    async with harness(make_service(SpyExecutor(), signing=signing)) as h:
        created = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
        got = (await h.invoke("jarvis.run.get", run_id=created["run_id"])).json()
    assert created["attestation"] == got["attestation"]
    attestation = got["attestation"]
    bundle = attestation["bundle"].encode()
    public = signing.attester.key.public
    (line,) = attestation["bundle"].splitlines()
    Envelope.from_dict(json.loads(line)).verify([SSlibKey.from_crypto(public.key, public.keyid)], 1)
    checks = verify_bundle(bundle, public, decode_evidence(json.dumps(got).encode()))
    assert [c.name for c in checks if not c.ok] == [], checks
    assert {c.name for c in checks} >= {"signature", "schema", "stdout", "stderr", "ending"}
    statement = _statement(attestation)
    assert statement["predicateType"] == JARVIS_PREDICATE_TYPE
    predicate = statement["predicate"]
    assert predicate["run"]["runId"] == got["run_id"]
    assert predicate["request"] == {
        "tool": "jarvis.run.create",
        "argv": ["echo", "hi"],
        "cwd": "",
        "actor": ACTOR,
    }
    assert predicate["policy"] == {
        "policyDigest": POLICY_DIGEST,
        "matchedRule": "echo",
        "reason": created["reason"],
    }
    assert predicate["envelope"]["profile"] == "host"
    assert predicate["ending"]["exitCode"] == 0 and predicate["ending"]["cleanup"] == "complete"


async def test_a_changed_record_fails_the_check(signing: RunSigning) -> None:
    """The run.get record with one stream character changed: the stdout check fails."""
    async with harness(make_service(SpyExecutor(), signing=signing)) as h:
        created = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
    created["stdout"]["text"] = "hI\n"
    checks = verify_bundle(
        created["attestation"]["bundle"].encode(),
        signing.attester.key.public,
        decode_evidence(json.dumps(created).encode()),
    )
    assert [c.name for c in checks if not c.ok] == ["stdout"]


async def test_denied_and_failed_runs_have_no_statement(signing: RunSigning) -> None:
    """A denied request starts nothing; an envelope that failed proved no end: neither signs."""
    failure = EnvelopeFailure(FailureKind.SETUP_FAILED, "mount", "refused")
    async with harness(make_service(SpyExecutor(failure=failure), signing=signing)) as h:
        denied = (await h.invoke("jarvis.run.create", argv=["echo", "forbidden"])).json()
        failed = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
        got = (await h.invoke("jarvis.run.get", run_id=failed["run_id"])).json()
    assert denied["run_id"] is None and "attestation" not in denied
    assert got["status"] == "failed" and got["attestation"] is None


async def test_without_a_key_the_field_is_null() -> None:
    """A service made without signing answers `attestation: null`."""
    async with harness(make_service(SpyExecutor())) as h:
        created = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
    assert created["attestation"] is None


@pytest.mark.envelope
def test_the_real_jarvis_signs_with_its_host_key_and_jigcmd_verify_accepts(tmp_path: Path) -> None:
    """`jigcmd jarvis` in the real envelope: run.create's statement verifies with `jigcmd key`."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path) as child, httpx.Client(timeout=60) as client:
        created = client.post(
            f"{child.base}/tools/jarvis.run.create",
            json=invoke_body("jarvis.run.create", argv=["echo", "signed"]),
            headers=auth(),
        ).json()
        state = child.state_dir
    assert created["status"] == "exited", created
    (tmp_path / "run.intoto.jsonl").write_text(created["attestation"]["bundle"])
    (tmp_path / "record.json").write_text(json.dumps(created))
    key = _jigcmd("key", "--state-dir", str(state))
    (tmp_path / "host.pub").write_bytes(key.stdout)
    checked = _jigcmd(
        "verify",
        str(tmp_path / "run.intoto.jsonl"),
        "--key",
        str(tmp_path / "host.pub"),
        "--evidence",
        str(tmp_path / "record.json"),
    )
    assert checked.returncode == 0, checked.stdout
    statement = _statement(created["attestation"])
    assert statement["predicate"]["envelope"]["profile"] == "host"
    policy = (tmp_path / "policy.toml").read_bytes()
    assert statement["predicate"]["policy"]["policyDigest"] == (
        "sha256:" + hashlib.sha256(policy).hexdigest()
    )


def test_jarvis_refuses_to_start_with_a_signing_key_it_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing --signing-key: exit 2 naming the file, nothing bound."""
    monkeypatch.setenv("JARVIS_BEARER_TOKEN", TOKEN)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    missing = tmp_path / "missing.pem"
    assert jarvis(policy, "127.0.0.1", 0, tmp_path / "state", signing_key=missing) == 2
    assert f"signing key {missing}: no such file" in capsys.readouterr().err


def _jigcmd(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
