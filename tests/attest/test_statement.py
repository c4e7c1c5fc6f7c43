"""A run's statement: what it says, that an independent DSSE + Ed25519 verifier accepts it,
that it matches its published JSON Schema, and that one changed byte fails the check."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.signer import SSlibKey

from jigcmd.attest import dsse
from jigcmd.attest.attester import Attester, HostIdentity, RunRecord
from jigcmd.attest.keys import SigningKey, key_id
from jigcmd.attest.statement import (
    RUN_PREDICATE_TYPE,
    TEST_RESULT_TYPE,
    AdmissionFacts,
    Descriptor,
    RunFacts,
    RuntimeFacts,
    TestReport,
    rfc3339,
)
from jigcmd.attest.verify import Check, verify_bundle
from jigcmd.envelope.api import Enforced
from jigcmd.evidence import Evidence, ResourceReport, StreamText
from jigcmd.plan import Limits

ROOT = Path(__file__).parents[2]
SHA = "sha256:" + "ab" * 32
STDERR = "\ntest/a.test.ts:\n(pass) math > adds [0.02ms]\n(fail) math > fails [9.58ms]\n 1 pass\n"


def _identity() -> HostIdentity:
    return HostIdentity(
        admission=AdmissionFacts(
            lock_digest="sha256:" + "11" * 32,
            binding_digest="sha256:" + "22" * 32,
            descriptor=Descriptor(
                id="https://jig.md/contracts/project-command", version="1.0.0", digest=SHA
            ),
        ),
        runtime=RuntimeFacts(bun_version="1.4.2", bun_sha256="sha256:" + "33" * 32),
    )


def _evidence(kind: str = "test", exit_code: int = 1) -> Evidence:
    return Evidence(
        candidate_digest="sha256:" + "44" * 32,
        command="tests" if kind == "test" else "cli",
        invocation=["bun", "test", "test/a.test.ts"],
        stdin_digest="sha256:" + "55" * 32,
        stdout=StreamText(text="bun test v1.4.2\n", truncated=False),
        stderr=StreamText(text=STDERR, truncated=False),
        exit_code=exit_code,
        signal=None,
        stop_reason="exited",
        cleanup="complete",
    )


REPORT = ResourceReport(
    wall_ms=91.5,
    setup_ms=20.25,
    cpu_ms=8.0,
    peak_memory_bytes=3_891_200,
    oom_killed=False,
    pids_limit_hit=False,
    deadline_hit=False,
)


def _record(kind: str = "test", resources: ResourceReport | None = REPORT) -> RunRecord:
    evidence = _evidence(kind)
    return RunRecord(
        run=RunFacts(run_id="da43d0baac3b41fe", caller_run="run-1", operation_id="op-1"),
        kind=kind,
        enforced=Enforced(
            profile="candidate",
            namespaces=("user", "mount", "pid", "ipc", "uts", "net", "cgroup"),
            limits=Limits(),
            seccomp_filter_sha256="66" * 32,
            cpus=(1,),
            rootless=False,
        ),
        plan_digest="sha256:" + "77" * 32,
        evidence=evidence,
        stdout=evidence.stdout.text.encode(),
        stderr=evidence.stderr.text.encode(),
        resources=resources,
        started_unix_ms=1_764_619_240_552,
        finished_unix_ms=1_764_619_240_651,
    )


@pytest.fixture
def attester() -> Attester:
    return Attester(SigningKey(Ed25519PrivateKey.generate(), "test"), _identity())


def _statements(bundle: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(base64.b64decode(json.loads(line)["payload"]))
        for line in bundle.decode().splitlines()
    ]


def test_an_independent_dsse_ed25519_verifier_accepts_every_envelope(attester: Attester) -> None:
    """securesystemslib verifies each envelope of the bundle with the host's public key."""
    bundle = attester.attest(_record())
    public = attester.key.public
    key = SSlibKey.from_crypto(public.key, keyid=public.keyid)
    lines = bundle.decode().splitlines()
    assert len(lines) == 2
    for line in lines:
        envelope = SslibEnvelope.from_dict(json.loads(line))
        assert envelope.payload_type == "application/vnd.in-toto+json"
        accepted = envelope.verify([key], 1)
        assert set(accepted) == {public.keyid}


def test_securesystemslib_rejects_a_changed_payload(attester: Attester) -> None:
    """The independent verifier refuses the envelope once one payload byte differs."""
    from securesystemslib.exceptions import VerificationError  # noqa: PLC0415 - test only

    line = json.loads(attester.attest(_record("run")).decode().splitlines()[0])
    body = bytearray(base64.b64decode(line["payload"]))
    body[10] ^= 1
    line["payload"] = base64.b64encode(bytes(body)).decode()
    public = attester.key.public
    with pytest.raises(VerificationError):
        SslibEnvelope.from_dict(line).verify([SSlibKey.from_crypto(public.key, public.keyid)], 1)


def test_the_run_statement_says_which_candidate_ran_under_what_and_how_it_ended(
    attester: Attester,
) -> None:
    """Subjects bind the candidate and both streams; the predicate carries every named fact."""
    run, _ = _statements(attester.attest(_record()))
    assert run["_type"] == "https://in-toto.io/Statement/v1"
    assert run["predicateType"] == RUN_PREDICATE_TYPE
    subjects = {s["name"]: s["digest"]["sha256"] for s in run["subject"]}
    assert subjects == {
        "candidate": "44" * 32,
        "stdout": hashlib.sha256(b"bun test v1.4.2\n").hexdigest(),
        "stderr": hashlib.sha256(STDERR.encode()).hexdigest(),
    }
    predicate = run["predicate"]
    assert predicate["run"] == {
        "runId": "da43d0baac3b41fe",
        "callerRun": "run-1",
        "operationId": "op-1",
    }
    assert predicate["admission"]["lockDigest"] == "sha256:" + "11" * 32
    assert predicate["admission"]["descriptor"]["version"] == "1.0.0"
    assert predicate["runtime"] == {"bunVersion": "1.4.2", "bunSha256": "sha256:" + "33" * 32}
    envelope = predicate["envelope"]
    assert envelope["limits"]["memoryBytes"] == Limits().memory_bytes
    assert envelope["cpus"] == [1] and envelope["rootless"] is False
    assert envelope["seccompFilterSha256"] == "66" * 32
    assert "net" in envelope["namespaces"]
    ending = predicate["ending"]
    assert (ending["exitCode"], ending["stopReason"], ending["cleanup"]) == (
        1,
        "exited",
        "complete",
    )
    assert ending["resources"]["peakMemoryBytes"] == 3_891_200
    assert predicate["startedOn"] == "2025-12-01T20:00:40.552Z"
    assert predicate["host"]["keyId"] == attester.keyid


def test_a_statement_signed_before_the_cleanup_was_proved_says_so(attester: Attester) -> None:
    """Without the resource report the cleanup is `unconfirmed` and `resources` null."""
    run, *_ = _statements(attester.attest(_record(resources=None)))
    assert run["predicate"]["ending"]["cleanup"] == "unconfirmed"
    assert run["predicate"]["ending"]["resources"] is None


def test_a_test_command_gets_test_result_v0_1_with_the_report_marked_candidate_influenced(
    attester: Attester,
) -> None:
    """result from the exit status; names from the runner; its report annotated as such."""
    bundle = attester.attest(_record())
    first_payload = base64.b64decode(json.loads(bundle.decode().splitlines()[0])["payload"])
    _, tests = _statements(bundle)
    assert tests["predicateType"] == TEST_RESULT_TYPE
    predicate = tests["predicate"]
    assert predicate["result"] == "FAILED"
    assert predicate["passedTests"] == ["test/a.test.ts > math > adds"]
    assert predicate["failedTests"] == ["test/a.test.ts > math > fails"]
    configuration = {c["name"]: c for c in predicate["configuration"]}
    assert (
        configuration["jigcmd run statement"]["digest"]["sha256"]
        == hashlib.sha256(first_payload).hexdigest()
    )
    (report,) = [c for c in predicate["configuration"] if "annotations" in c]
    assert report["annotations"]["candidateInfluenced"] is True
    assert [s["name"] for s in tests["subject"]] == ["candidate"]


@pytest.mark.parametrize(
    ("exit_code", "report", "result"),
    [
        (0, TestReport(passed=("a",), failed=(), source="s", source_sha256="0" * 64), "PASSED"),
        (1, TestReport(passed=("a",), failed=(), source="s", source_sha256="0" * 64), "FAILED"),
        (0, TestReport(passed=(), failed=("b",), source="s", source_sha256="0" * 64), "FAILED"),
        (
            0,
            TestReport(
                passed=("a",), failed=(), source="s", source_sha256="0" * 64, incomplete="x"
            ),
            "WARNED",
        ),
    ],
)
def test_the_result_passes_only_an_exit_0_with_no_failed_test_and_a_whole_report(
    attester: Attester, exit_code: int, report: TestReport, result: str
) -> None:
    """A failed test named after an exit 0 fails it; a report not whole only warns."""
    evidence = _evidence(exit_code=exit_code)
    record = dataclasses.replace(_record(), evidence=evidence, tests=report)
    _, tests = _statements(attester.attest(record))
    assert tests["predicate"]["result"] == result


def test_a_run_command_gets_only_the_run_statement(attester: Attester) -> None:
    """No test result for a `run` command."""
    assert len(_statements(attester.attest(_record("run")))) == 1


def test_the_statement_validates_against_the_published_json_schema(attester: Attester) -> None:
    """schemas/run-predicate.v1.schema.json (checked with jsonschema) accepts the predicate."""
    schema = json.loads((ROOT / "schemas" / "run-predicate.v1.schema.json").read_text())
    for resources in (REPORT, None):
        run, *_ = _statements(attester.attest(_record(resources=resources)))
        jsonschema.validate(run["predicate"], schema)
    broken = dict(run["predicate"], extra=1)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_jigcmds_own_check_passes_a_good_bundle_with_its_evidence(attester: Attester) -> None:
    """Every check holds for the bundle, the host key and the evidence it was made from; the
    evidence alone names no run nor lock, so those two are said unchecked."""
    checks = verify_bundle(attester.attest(_record()), attester.key.public, _evidence())
    assert [(c.name, c.ok) for c in checks] == [
        ("bundle", True),
        ("signature", True),
        ("schema", True),
        ("test result", True),
        ("signer", True),
        ("run", True),
        ("admission", True),
        ("candidate", True),
        ("stdout", True),
        ("stderr", True),
        ("ending", True),
    ]
    assert [c.name for c in checks if c.skipped] == ["run", "admission"]


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("bun test JUnit report", "(names from the runner's report, candidate-influenced)"),
        (
            "bun test console output (stderr)",
            "(names from the runner's console lines, not exact: a name there is cut at a line "
            "break, and a ' > ' within a name reads as the separator, candidate-influenced)",
        ),
    ],
)
def test_verify_says_when_the_test_names_are_the_consoles_and_not_exact(
    attester: Attester, source: str, said: str
) -> None:
    """A statement whose names were read from Bun's console lines (no JUnit report) says so."""
    report = TestReport(passed=("t > a",), failed=(), source=source, source_sha256="0" * 64)
    record = dataclasses.replace(_record(), tests=report)
    checks = verify_bundle(attester.attest(record), attester.key.public)
    (line,) = [c.detail for c in checks if c.name == "test result"]
    assert line.endswith(said)


def _lines(bundle: bytes) -> list[bytes]:
    return [line + b"\n" for line in bundle.splitlines()]


# (the run's kind, its bundle made from a test command's lines and a run command's, the verdict)
_MISFITS: list[tuple[str, Callable[[list[bytes], list[bytes]], list[bytes]], str]] = [
    ("test", lambda test, run: test[:1], "one test result, but this one has 0 test result(s)"),
    ("test", lambda test, run: [*test, test[1]], "but this one has 2 test result(s)"),
    ("run", lambda test, run: [run[0], test[1]], "alone, but this one has 2 statements"),
]


@pytest.mark.parametrize(
    ("kind", "bundle_of", "says"), _MISFITS, ids=["dropped", "duplicated", "padded"]
)
def test_a_bundle_without_exactly_the_statements_its_run_implies_is_not_verified(
    attester: Attester,
    kind: str,
    bundle_of: Callable[[list[bytes], list[bytes]], list[bytes]],
    says: str,
) -> None:
    """The run statement says its command's kind: a test command's bundle is it and one test
    result, another's it alone; one dropped or added is a failed check, evidence or not."""
    test = _lines(attester.attest(_record("test")))
    run = _lines(attester.attest(_record("run")))
    bundle = b"".join(bundle_of(test, run))
    for evidence in (None, _evidence(kind)):
        checks = verify_bundle(bundle, attester.key.public, evidence)
        failed = [c for c in checks if not c.ok]
        assert [(c.name, c.detail.endswith(says)) for c in failed] == [("test result", True)]


def test_a_run_commands_bundle_of_one_statement_still_verifies(attester: Attester) -> None:
    """A bundle that is legitimately one statement (a run command's) needs no test result."""
    checks = verify_bundle(attester.attest(_record("run")), attester.key.public, _evidence("run"))
    assert all(c.ok for c in checks) and "test result" not in [c.name for c in checks]


def _flip(text: str, index: int) -> str:
    data = bytearray(base64.b64decode(text))
    data[index] ^= 1
    return base64.b64encode(bytes(data)).decode()


@pytest.mark.parametrize(("field", "index"), [("payload", 0), ("payload", 200), ("sig", 5)])
def test_one_changed_byte_in_the_payload_or_the_signature_fails_the_signature_check(
    attester: Attester, field: str, index: int
) -> None:
    """A flipped bit anywhere in the signed bytes: the signature check fails, saying so."""
    lines = attester.attest(_record()).decode().splitlines()
    envelope = json.loads(lines[0])
    if field == "payload":
        envelope["payload"] = _flip(envelope["payload"], index)
    else:
        envelope["signatures"][0]["sig"] = _flip(envelope["signatures"][0]["sig"], index)
    tampered = (json.dumps(envelope) + "\n" + lines[1] + "\n").encode()
    checks = verify_bundle(tampered, attester.key.public)
    assert checks[-1].name == "signature" and not checks[-1].ok
    assert "no signature verifies" in checks[-1].detail


def test_another_key_fails_the_signature_check(attester: Attester) -> None:
    """A statement verified against some other key is not verified."""
    other = SigningKey(Ed25519PrivateKey.generate(), "other").public
    checks = verify_bundle(attester.attest(_record()), other)
    assert not checks[-1].ok and other.keyid in checks[-1].detail


def test_a_statement_of_a_rotated_key_names_the_key_it_was_signed_with(
    attester: Attester,
) -> None:
    """Verified against the host's new key: the failure names the old key id to look up."""
    new = SigningKey(Ed25519PrivateKey.generate(), "new").public
    checks = verify_bundle(attester.attest(_record()), new)
    detail = checks[-1].detail
    assert f"its signature names key {attester.key.public.keyid}" in detail
    assert "--key" in detail


@pytest.mark.parametrize(
    ("change", "failed"),
    [
        ({"candidateDigest": "sha256:" + "45" * 32}, "candidate"),
        ({"stdout": {"text": "bun test v1.4.3\n", "truncated": False}}, "stdout"),
        ({"stderr": {"text": STDERR + " ", "truncated": False}}, "stderr"),
        ({"exitCode": 0}, "ending"),
        ({"invocation": ["bun", "test"]}, "ending"),
    ],
)
def test_evidence_that_differs_from_the_statement_fails_the_check_naming_it(
    attester: Attester, change: dict[str, Any], failed: str
) -> None:
    """Changed candidate digest, stream or ending: that check fails, the others hold."""
    evidence = msgspec.convert({**msgspec.to_builtins(_evidence()), **change}, Evidence)
    checks = verify_bundle(attester.attest(_record()), attester.key.public, evidence)
    assert [c.name for c in checks if not c.ok] == [failed]


def test_a_signed_payload_of_the_wrong_shape_fails_the_schema_check(attester: Attester) -> None:
    """A validly signed statement that is not the run predicate's shape is refused."""
    body = json.dumps({"_type": "https://in-toto.io/Statement/v1", "subject": []}).encode()
    bundle = dsse.encode_bundle([dsse.sign(body, attester.key.sign, attester.keyid)])
    checks = verify_bundle(bundle, attester.key.public)
    assert (checks[-1].name, checks[-1].ok) == ("schema", False)


def test_the_statement_names_the_signing_keys_id(attester: Attester) -> None:
    """host.keyId is the id of the key that signed it, as the envelope's hint is."""
    bundle = attester.attest(_record("run"))
    (run,) = _statements(bundle)
    assert run["predicate"]["host"]["keyId"] == key_id(attester.key.private.public_key())
    assert json.loads(bundle)["signatures"][0]["keyid"] == attester.keyid


@pytest.mark.parametrize(
    "unix_ms",
    [0, 999, 1_000, 951_782_399_999, 951_782_400_000, 1_796_515_200_123, 4_102_444_799_999],
)
def test_times_are_rfc3339_utc_with_milliseconds(unix_ms: int) -> None:
    """The statement's times read as `datetime` reads the same instant, to the millisecond."""
    text = rfc3339(unix_ms)
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    assert moment.tzinfo == datetime.UTC
    assert round(moment.timestamp() * 1000) == unix_ms
    assert len(text) == len("2026-12-01T19:53:05.123Z")
    assert text.endswith("Z")


@pytest.mark.parametrize("keyid", ["0" * 64, "", None])
def test_a_signature_naming_another_key_or_none_fails_as_securesystemslib_refuses_it(
    attester: Attester, keyid: str | None
) -> None:
    """The signature verifies, but its keyid is altered or removed: securesystemslib selects
    the key by keyid and refuses the envelope, and so does jigcmd, naming both ids."""
    line = json.loads(attester.attest(_record("run")).decode().splitlines()[0])
    if keyid is None:
        del line["signatures"][0]["keyid"]
    else:
        line["signatures"][0]["keyid"] = keyid
    public = attester.key.public
    bundle = (json.dumps(line) + "\n").encode()
    with pytest.raises(Exception):  # noqa: B017, PT011 - a missing keyid is a KeyError there
        # from_dict takes the fields out of the dict it is given: a copy.
        SslibEnvelope.from_dict(json.loads(bundle)).verify(
            [SSlibKey.from_crypto(public.key, public.keyid)], 1
        )
    checks = verify_bundle(bundle, public)
    named = f"names key {keyid}" if keyid else "names no key (no keyid)"
    assert checks[-1] == Check(
        "signature",
        False,
        f"envelope 1: its signature verifies with key {public.keyid} but {named}: jigcmd writes "
        "the signing key's id, and a verifier that selects the key by keyid refuses it",
    )
