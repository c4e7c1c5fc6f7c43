"""What `jigcmd verify` checks in a run's attestation, each check a verdict with its reason.

In order: the bundle parses; every envelope's signature verifies over its PAE with the given
key and names that key's id (`keyid` selects the key, as securesystemslib's does, and never
makes one trusted); every payload is a statement of the schema its `predicateType` names
(strictly: the types `schemas/run-predicate.v1.schema.json` and the `jarvis-run-predicate`
schemas are generated from; a jarvis statement is v2, or v1 as jigcmd
made them before they named the executable); a test result names the run statement it
belongs to; the statement is of the caller's run, operation and lock when it gives them,
and said unchecked when the evidence names none (a Run/1 answer: `verify_run`); and, given
the evidence, its candidate digest and streams match the subjects and
the rest the predicate. The evidence is any shape `inputs.read_evidence` reads: the ten
fields, an MCP result's budgeted view (each field it carries, its cut said unchecked), or a
jarvis record (its run id, request, rule and ending too). A check that cannot be made, every
evidence check without evidence among them, is a skipped `Check`: said, never a failure.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import msgspec

from jigcmd.attest import dsse
from jigcmd.attest.checks import Check, Statement, candidate, skip, streams
from jigcmd.attest.inputs import (
    EvidenceFile,
    JarvisResult,
    JarvisView,
    McpResult,
    RunAnswer,
    read_evidence,
)
from jigcmd.attest.keys import PublicKey
from jigcmd.attest.statement import (
    JARVIS_PREDICATE_TYPE,
    JARVIS_V2_PREDICATE_TYPE,
    RUN_PREDICATE_TYPE,
    TEST_RESULT_TYPE,
    JarvisRunStatement,
    JarvisRunStatementV2,
    RunStatement,
    TestResultStatement,
)
from jigcmd.attest.verify_answer import around_checks
from jigcmd.attest.verify_record import record_checks
from jigcmd.attest.verify_run import Expected, run_checks
from jigcmd.attest.verify_view import view_checks
from jigcmd.evidence import Evidence
from jigcmd.jsonio import strict

__all__ = ["Check", "Expected", "JarvisView", "decode_evidence", "verify_bundle"]


class _Kind(msgspec.Struct):
    predicate_type: str = msgspec.field(name="predicateType")


_kind = msgspec.json.Decoder(_Kind)
_jarvis = msgspec.json.Decoder(JarvisRunStatement)
_jarvis_v2 = msgspec.json.Decoder(JarvisRunStatementV2)
_run = msgspec.json.Decoder(RunStatement)
_tests = msgspec.json.Decoder(TestResultStatement)


def decode_evidence(data: bytes) -> EvidenceFile:
    """Evidence from its JSON, in any shape jigcmd answers it in (`inputs.read_evidence`)."""
    return read_evidence(data)


def verify_bundle(
    data: bytes,
    key: PublicKey,
    evidence: EvidenceFile | None = None,
    expected: Expected | None = None,
) -> list[Check]:
    """Every check on the bundle `data` against `key` (and `evidence`, and what the caller
    `expected` of its run); stops at a broken one."""
    try:
        envelopes = dsse.decode_bundle(data)
    except dsse.BundleError as exc:
        return [Check("bundle", False, str(exc))]
    checks = [Check("bundle", True, f"{len(envelopes)} DSSE envelope(s)")]
    unknown = dsse.unknown_fields(data)
    if unknown:
        why = "not DSSE envelope fields, so unsigned and no fact of the run: "
        checks.append(skip("envelope fields", why + ", ".join(unknown)))
    signature = _signatures(envelopes, key)
    checks.append(signature)
    if not signature.ok:
        return checks
    payloads = [dsse.payload_of(envelope) for envelope in envelopes]
    schema, statement = _schema(payloads)
    checks.append(schema)
    if statement is None:
        return checks
    if isinstance(statement, RunStatement):
        tests = _test_result(statement, payloads)
        if tests is not None:
            checks.append(tests)
    keyid = statement.predicate.host.key_id
    named = f"the statement names key {keyid}"
    if keyid != key.keyid:
        named += f", not the verifying key {key.keyid}"
    checks.append(Check("signer", keyid == key.keyid, named))
    checks.extend(_which_run(statement, evidence, expected or Expected()))
    checks.extend(_evidence(statement, evidence, data))
    return checks


def _which_run(
    statement: Statement, evidence: EvidenceFile | None, expected: Expected
) -> list[Check]:
    """Whether the statement is of the caller's run: the evidence named no run, or it asked."""
    if not isinstance(statement, RunStatement):
        if not expected.given():
            return []
        why = "--run-id, --operation-id and --lock name a Project Command run, not a jarvis run"
        return [Check("run", False, f"a jarvis statement: {why}")]
    # An answer that names no run, operation or lock: the same call's statement under any
    # other run would match its evidence, so what it leaves unchecked is said.
    if isinstance(evidence, Evidence):
        return run_checks(statement, expected, "the evidence alone")
    if isinstance(evidence, RunAnswer) and (
        evidence.around is None or evidence.around.shape == "Run/1 error"
    ):
        return run_checks(statement, expected, "a Run/1 answer", run1=True)
    if isinstance(evidence, McpResult) and evidence.around is None:
        return run_checks(statement, expected, "an MCP structuredContent alone")
    return run_checks(statement, expected, None)


def _evidence(statement: Statement, evidence: EvidenceFile | None, bundle: bytes) -> list[Check]:
    """The checks of the evidence against the statement; without it, what went unchecked."""
    if isinstance(statement, JarvisRunStatement | JarvisRunStatementV2):
        if evidence is None:
            names = ("run", "stdout", "stderr", "request", "policy", "ending")
            return [skip(name, "no --evidence") for name in names]
        if isinstance(evidence, JarvisResult):
            return record_checks(statement, evidence, bundle)
        return [Check("evidence", False, "a jarvis statement, but Project Command evidence")]
    if evidence is None:
        return [skip(name, "no --evidence") for name in ("candidate", "stdout", "stderr", "ending")]
    if isinstance(evidence, JarvisResult):
        return [Check("evidence", False, "a run statement, but a jarvis record")]
    if isinstance(evidence, Evidence):
        return _evidence_checks(statement, evidence)
    around: list[Check] = []
    unknown: list[str] = []
    if evidence.around is not None:
        around, unknown = around_checks(statement, evidence.around, bundle)
    if isinstance(evidence, McpResult):
        merged = replace(evidence, unknown=(*evidence.unknown, *unknown))
        return [*view_checks(statement, merged), *around]
    checks = [*_evidence_checks(statement, evidence.evidence), *around]
    if evidence.around is not None and evidence.around.shape == "run --json":
        why = "not fields of a `jigcmd run --json` answer, so no fact of the run: "
        checks += [skip("unknown fields", why + ", ".join(unknown))] if unknown else []
        return checks
    unusual = (*evidence.unusual, *unknown)
    if unusual:
        why = "jigcmd writes no Run/1 answer with these, so they are no fact of the run: "
        checks.append(skip("answer line", why + "; ".join(unusual)))
    return checks


def _signatures(envelopes: list[dsse.Envelope], key: PublicKey) -> Check:
    for index, envelope in enumerate(envelopes, start=1):
        where = f"envelope {index}"
        if envelope.payload_type != dsse.PAYLOAD_TYPE:
            return Check("signature", False, f"{where}: payloadType {envelope.payload_type!r}")
        try:
            message = dsse.pae(envelope.payload_type, dsse.payload_of(envelope))
            verifying = [
                signature
                for signature in envelope.signatures
                if key.verify(dsse.signature_bytes(signature), message)
            ]
        except dsse.BundleError as exc:
            return Check("signature", False, f"{where}: {exc}")
        if not verifying:
            return Check("signature", False, f"{where}: {_unverified(envelope, key)}")
        # A verifier that selects the key by `keyid` (securesystemslib) never tries this key
        # on a signature naming another, or none: held to the same, so both say the same.
        if not any(signature.keyid == key.keyid for signature in verifying):
            named = verifying[0].keyid
            said = f"names key {named}" if named else "names no key (no keyid)"
            return Check(
                "signature",
                False,
                f"{where}: its signature verifies with key {key.keyid} but {said}: jigcmd "
                "writes the signing key's id, and a verifier that selects the key by keyid "
                "refuses it",
            )
    return Check("signature", True, f"Ed25519 over DSSE PAE, key {key.keyid}")


def _unverified(envelope: dsse.Envelope, key: PublicKey) -> str:
    """Why no signature verified: the key the signature names, when it names another one."""
    said = f"no signature verifies with key {key.keyid}"
    named = sorted({s.keyid for s in envelope.signatures if s.keyid and s.keyid != key.keyid})
    if not named:
        return f"{said} (changed payload or signature, or another key)"
    # The keyid only says which public key to try; the signature still decides.
    return (
        f"{said}; its signature names key {', '.join(named)}: verify with that key's public "
        "half, --key FILE (the signer's: another host's, or this host's before a rotation), "
        "only if you trust that key as the host's: anyone can sign a statement with a key of "
        "their own, and a forged statement names its forger's key"
    )


def _schema(payloads: list[bytes]) -> tuple[Check, Statement | None]:
    expected: str = RUN_PREDICATE_TYPE
    for index, payload in enumerate(payloads, start=1):
        try:
            # A duplicate key is read last-wins here, first-wins by another verifier.
            strict.loads(payload)
        except strict.StrictJSONError as exc:
            return Check("schema", False, f"statement {index} is not strict JSON: {exc}"), None
    try:
        kind = _kind.decode(payloads[0]).predicate_type
        if kind in (JARVIS_V2_PREDICATE_TYPE, JARVIS_PREDICATE_TYPE) and len(payloads) > 1:
            why = f"a jarvis run's bundle is its one statement, but this one has {len(payloads)}"
            return Check("schema", False, why), None
        if kind == JARVIS_V2_PREDICATE_TYPE:
            expected = kind
            current = _jarvis_v2.decode(payloads[0])
            return Check("schema", True, "in-toto Statement v1: jarvis-run/v2"), current
        if kind == JARVIS_PREDICATE_TYPE:
            # Made before statements named the executable; journals still hold them.
            expected = kind
            older = _jarvis.decode(payloads[0])
            return Check("schema", True, "in-toto Statement v1: jarvis-run/v1"), older
        statement = _run.decode(payloads[0])
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        why = f"statement 1 is not a {expected} statement: {exc}"
        return Check("schema", False, why), None
    for index, payload in enumerate(payloads[1:], start=2):
        try:
            _tests.decode(payload)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return Check(
                "schema", False, f"statement {index} is not {TEST_RESULT_TYPE}: {exc}"
            ), None
    kinds = "run/v1" + (" + test-result/v0.1" if len(payloads) > 1 else "")
    return Check("schema", True, f"in-toto Statement v1: {kinds}"), statement


_CONSOLE_NAMES = (
    "names from the runner's console lines, not exact: a name there is cut at a line break, "
    "and a ' > ' within a name reads as the separator"
)


def _test_result(statement: RunStatement, payloads: list[bytes]) -> Check | None:
    """A test command's bundle is its run statement and exactly one test result naming it;
    any other command's is its run statement alone (None: nothing to say)."""
    count = len(payloads)
    kind = statement.predicate.command.kind
    if kind != "test":
        if count == 1:
            return None
        return Check(
            "test result",
            False,
            f"a {kind} command's bundle is its run statement alone, but this one has "
            f"{count} statements",
        )
    if count != 2:
        return Check(
            "test result",
            False,
            "a test command's bundle is its run statement and exactly one test result, but "
            f"this one has {count - 1} test result(s)",
        )
    expected = hashlib.sha256(payloads[0]).hexdigest()
    tests = _tests.decode(payloads[1])
    named = [d for d in tests.predicate.configuration if d.name == "jigcmd run statement"]
    if not named or named[0].digest.get("sha256") != expected:
        return Check("test result", False, "the test result does not name this run statement")
    predicate = tests.predicate
    incomplete = [
        note
        for d in predicate.configuration
        if d.annotations and isinstance(note := d.annotations.get("incomplete"), str)
    ]
    caveat = f"; incomplete: {incomplete[0]}" if incomplete else ""
    # Read from the console (no JUnit report): a name is not exact there, as its
    # `testNames` says (statements signed before it existed say it by the source's name).
    console = any("console output" in d.name for d in predicate.configuration)
    source = _CONSOLE_NAMES if console else "names from the runner's report"
    return Check(
        "test result",
        True,
        f"{predicate.result}: {len(predicate.passed_tests)} passed, "
        f"{len(predicate.failed_tests)} failed ({source}, candidate-influenced){caveat}",
    )


def _evidence_checks(statement: RunStatement, evidence: Evidence) -> list[Check]:
    checks = [candidate(statement, evidence.candidate_digest)]
    checks.extend(streams(statement, evidence.stdout, evidence.stderr))
    predicate = statement.predicate
    ending = predicate.ending
    differs = [
        field
        for field, ok in (
            ("command", evidence.command == predicate.command.name),
            ("invocation", evidence.invocation == predicate.command.invocation),
            ("stdinDigest", evidence.stdin_digest == predicate.stdin_digest),
            ("exitCode", evidence.exit_code == ending.exit_code),
            ("signal", evidence.signal == ending.signal),
            ("stopReason", evidence.stop_reason == ending.stop_reason),
            ("stdout.truncated", evidence.stdout.truncated == ending.stdout.truncated),
            ("stderr.truncated", evidence.stderr.truncated == ending.stderr.truncated),
        )
        if not ok
    ]
    checks.append(
        Check("ending", False, "the evidence differs from the statement in " + ", ".join(differs))
        if differs
        else Check("ending", True, "command, invocation, stdin and how it ended match")
    )
    return checks
