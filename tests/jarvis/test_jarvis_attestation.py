"""jarvis's signed run statements: `jarvis.run.get` carries one for every completed run."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

from jigcmd.attest import dsse
from jigcmd.attest.attester import Attester
from jigcmd.attest.keys import SigningKey
from jigcmd.attest.statement import (
    JARVIS_PREDICATE_TYPE,
    JARVIS_V2_PREDICATE_TYPE,
    JarvisRunStatement,
)
from jigcmd.attest.verify import Check, decode_evidence, verify_bundle
from jigcmd.envelope.api import EnvelopeFailure, FailureKind
from jigcmd.frontends.jarvis import jarvis
from jigcmd.jarvis.statements import RunSigning
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import (
    ACTOR,
    POLICY,
    TOKEN,
    TRUE,
    SpyExecutor,
    auth,
    harness,
    invoke_body,
    linked_true,
    make_service,
)

POLICY_DIGEST = "sha256:" + "9" * 64
ROOT = Path(__file__).parents[2]
# The file the policy resolves `echo` to, which the run executes.
ECHO = os.path.realpath("/usr/bin/echo")


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
    assert {c.name for c in checks} >= {"request"}
    statement = _statement(attestation)
    assert statement["predicateType"] == JARVIS_V2_PREDICATE_TYPE
    predicate = statement["predicate"]
    assert predicate["run"]["runId"] == got["run_id"]
    assert predicate["request"] == {
        "tool": "jarvis.run.create",
        "argv": ["echo", "hi"],
        "executable": ECHO,
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


async def test_a_jarvis_bundle_padded_with_a_second_statement_is_refused_saying_so(
    signing: RunSigning,
) -> None:
    """Its one statement twice: the schema check says a jarvis bundle is one statement."""
    async with harness(make_service(SpyExecutor(), signing=signing)) as h:
        created = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
    (line,) = created["attestation"]["bundle"].splitlines()
    checks = verify_bundle(f"{line}\n{line}\n".encode(), signing.attester.key.public)
    schema = next(c for c in checks if c.name == "schema")
    assert not schema.ok
    assert schema.detail == "a jarvis run's bundle is its one statement, but this one has 2"


async def test_a_run_through_a_symlink_names_the_file_it_executed_and_verifies(
    signing: RunSigning, tmp_path: Path
) -> None:
    """Called by a link's path: the statement's argv keeps it, its executable is the target."""
    link, cwd, policy = linked_true(tmp_path)
    async with harness(make_service(SpyExecutor(), policy=policy, signing=signing)) as h:
        created = (await h.invoke("jarvis.run.create", argv=[link], cwd=cwd)).json()
        got = (await h.invoke("jarvis.run.get", run_id=created["run_id"])).json()
    request = _statement(got["attestation"])["predicate"]["request"]
    assert (request["argv"], request["executable"], request["cwd"]) == ([link], TRUE, cwd)
    checks = verify_bundle(
        got["attestation"]["bundle"].encode(),
        signing.attester.key.public,
        decode_evidence(json.dumps(got).encode()),
    )
    assert [c.name for c in checks if not c.ok] == [], checks
    request_check = next(c for c in checks if c.name == "request")
    assert request_check.detail == "argv, cwd, executable match"


async def test_a_record_naming_another_executable_fails_the_request_check(
    signing: RunSigning, tmp_path: Path
) -> None:
    """The run.get record with the link's path for its executable: the request check fails."""
    link, cwd, policy = linked_true(tmp_path)
    async with harness(make_service(SpyExecutor(), policy=policy, signing=signing)) as h:
        created = (await h.invoke("jarvis.run.create", argv=[link], cwd=cwd)).json()
        got = (await h.invoke("jarvis.run.get", run_id=created["run_id"])).json()
    checks = verify_bundle(
        got["attestation"]["bundle"].encode(),
        signing.attester.key.public,
        decode_evidence(json.dumps({**got, "executable": link}).encode()),
    )
    assert [(c.name, c.detail) for c in checks if not c.ok] == [
        ("request", "the record differs from the statement in executable")
    ]


async def test_a_statement_whose_executable_was_changed_fails_the_signature_check(
    signing: RunSigning,
) -> None:
    """The payload rewritten to name another executable, the signature kept: not verified."""
    async with harness(make_service(SpyExecutor(), signing=signing)) as h:
        created = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
    envelope = json.loads(created["attestation"]["bundle"])
    statement = _statement(created["attestation"])
    statement["predicate"]["request"]["executable"] = "/usr/bin/id"
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    checks = verify_bundle(
        (json.dumps(envelope) + "\n").encode(),
        signing.attester.key.public,
        decode_evidence(json.dumps({**created, "executable": "/usr/bin/id"}).encode()),
    )
    assert (checks[-1].name, checks[-1].ok) == ("signature", False)


async def test_the_predicate_is_v2_because_the_v1_schema_refuses_an_executable(
    signing: RunSigning,
) -> None:
    """The published v2 schema accepts the predicate; v1's, which forbids unknown fields, not."""
    async with harness(make_service(SpyExecutor(), signing=signing)) as h:
        created = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
    predicate = _statement(created["attestation"])["predicate"]
    schemas = ROOT / "schemas"
    v2 = json.loads((schemas / "jarvis-run-predicate.v2.schema.json").read_text())
    v1 = json.loads((schemas / "jarvis-run-predicate.v1.schema.json").read_text())
    jsonschema.validate(predicate, v2)
    with pytest.raises(jsonschema.ValidationError, match="executable"):
        jsonschema.validate(predicate, v1)
    del predicate["request"]["executable"]
    jsonschema.validate(predicate, v1)


async def test_a_v1_statement_signed_before_the_executable_was_named_still_verifies(
    signing: RunSigning,
) -> None:
    """A jarvis-run/v1 statement, as journals keep them: every check holds with its record."""
    async with harness(make_service(SpyExecutor(), signing=signing)) as h:
        created = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
        got = (await h.invoke("jarvis.run.get", run_id=created["run_id"])).json()
    older = _as_v1(_statement(got["attestation"]), signing.attester)
    checks = verify_bundle(
        older, signing.attester.key.public, decode_evidence(json.dumps(got).encode())
    )
    assert [c.name for c in checks if not c.ok] == [], checks
    by_name = {c.name: c.detail for c in checks}
    assert by_name["schema"] == "in-toto Statement v1: jarvis-run/v1"
    assert by_name["request"] == "argv, cwd match"
    # The record's executable is no fact of a v1 statement: its own skip line, not a note.
    unsigned = [c for c in checks if c.name == "executable"]
    assert unsigned == [
        Check(
            "executable",
            True,
            f"the record's {got['executable']!r}: a jarvis-run/v1 statement names no "
            "executable, so it is not signed",
            skipped=True,
        )
    ], checks
    tampered = json.dumps({**got, "argv": ["echo", "HI"]}).encode()
    checks = verify_bundle(older, signing.attester.key.public, decode_evidence(tampered))
    assert [c.name for c in checks if not c.ok] == ["request"]


def _as_v1(statement: dict[str, Any], attester: Attester) -> bytes:
    """`statement` as jarvis signed them before v2 (no executable), signed by `attester`."""
    del statement["predicate"]["request"]["executable"]
    statement["predicateType"] = JARVIS_PREDICATE_TYPE
    # Strictly of v1's types, encoded as the attester encodes (compact, sorted keys).
    body = msgspec.json.encode(msgspec.convert(statement, JarvisRunStatement), order="sorted")
    return dsse.encode_bundle([dsse.sign(body, attester.key.sign, attester.keyid)])


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
    # The record alone is its own evidence: its copy of the statement checked too.
    alone = _jigcmd("verify", str(tmp_path / "record.json"), "--key", str(tmp_path / "host.pub"))
    assert alone.returncode == 0, alone.stdout
    assert b"no --evidence" not in alone.stdout
    attestation = created["attestation"]
    forged = {
        **attestation,
        "digest": "sha256:" + "0" * 64,
        "envelopes": [{**attestation["envelopes"][0], "payload": "AAAA"}],
    }
    (tmp_path / "forged.json").write_text(json.dumps({**created, "attestation": forged}))
    alone = _jigcmd("verify", str(tmp_path / "forged.json"), "--key", str(tmp_path / "host.pub"))
    assert alone.returncode == 1, alone.stdout
    assert (
        b"FAIL attestation: the record's attestation is not the verified bundle's in digest, "
        b"envelopes\n"
    ) in alone.stdout
    statement = _statement(created["attestation"])
    assert statement["predicate"]["envelope"]["profile"] == "host"
    policy = (tmp_path / "policy.toml").read_bytes()
    assert statement["predicate"]["policy"]["policyDigest"] == (
        "sha256:" + hashlib.sha256(policy).hexdigest()
    )


@pytest.mark.envelope
def test_the_real_jarvis_runs_a_symlinks_target_and_its_statement_names_it(
    tmp_path: Path,
) -> None:
    """`jigcmd jarvis` runs a link to /usr/bin/true; `jigcmd verify` checks its executable."""
    machine_runs_jarvis()
    link, cwd, policy = linked_true(tmp_path)
    with JarvisChild(tmp_path, policy=policy) as child, httpx.Client(timeout=60) as client:
        created = client.post(
            f"{child.base}/tools/jarvis.run.create",
            json=invoke_body("jarvis.run.create", argv=[link], cwd=cwd),
            headers=auth(),
        ).json()
        got = client.post(
            f"{child.base}/tools/jarvis.run.get",
            json=invoke_body("jarvis.run.get", run_id=created["run_id"]),
            headers=auth(),
        ).json()
        state = child.state_dir
    assert (got["status"], got["exit_code"], got["executable"]) == ("exited", 0, TRUE), got
    assert _statement(got["attestation"])["predicate"]["request"]["executable"] == TRUE
    (tmp_path / "run.intoto.jsonl").write_text(got["attestation"]["bundle"])
    (tmp_path / "host.pub").write_bytes(_jigcmd("key", "--state-dir", str(state)).stdout)
    verdicts = []
    for executable in (TRUE, link):
        (tmp_path / "record.json").write_text(json.dumps({**got, "executable": executable}))
        verdicts.append(
            _jigcmd(
                "verify",
                str(tmp_path / "run.intoto.jsonl"),
                "--key",
                str(tmp_path / "host.pub"),
                "--evidence",
                str(tmp_path / "record.json"),
            )
        )
    kept, changed = verdicts
    assert kept.returncode == 0, kept.stdout
    assert b"ok   request: argv, cwd, executable match" in kept.stdout
    assert changed.returncode == 1, changed.stdout
    assert b"FAIL request: the record differs from the statement in executable" in changed.stdout


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
