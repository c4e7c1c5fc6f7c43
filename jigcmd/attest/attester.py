"""`Attester`: one run's facts in, its signed attestation (an in-toto bundle of DSSE) out.

The bundle's first envelope is the jigcmd run statement; a test command's run adds a
test-result/v0.1 statement that names the first by its payload's digest. A payload is
compact JSON with sorted keys (msgspec): DSSE signs bytes, so no canonical form is needed,
and the pure-Python canonical encoder cost 5 times the rest (see docs/attestation.md).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import msgspec

from jigcmd import __version__
from jigcmd.attest import dsse
from jigcmd.attest.keys import SigningKey
from jigcmd.attest.statement import (
    JARVIS_V2_PREDICATE_TYPE,
    RUN_PREDICATE_TYPE,
    STATEMENT_TYPE,
    AdmissionFacts,
    CommandFacts,
    Descriptor,
    EndingFacts,
    EnforcedLimits,
    EnvelopeFacts,
    HostFacts,
    JarvisPolicyFacts,
    JarvisRequestFactsV2,
    JarvisRunFacts,
    JarvisRunPredicateV2,
    JarvisRunStatementV2,
    ResourceDescriptor,
    RunFacts,
    RunPredicate,
    RunStatement,
    RuntimeFacts,
    StreamFacts,
    TestReport,
    rfc3339,
    stream_subject,
    test_result_statement,
)
from jigcmd.attest.testreport import read_console_report
from jigcmd.envelope.api import Enforced
from jigcmd.evidence import Evidence, ResourceReport, StopReason, StreamText
from jigcmd.policy.lock import Lock
from jigcmd.protocol.bunconsole import command_files

__all__ = ["Attester", "HostIdentity", "JarvisRecord", "RunRecord"]

_encoder = msgspec.json.Encoder(order="sorted")
_encode = _encoder.encode


@dataclass(frozen=True)
class HostIdentity:
    """What every run of one admitted Binding shares: its admission and its runtime."""

    admission: AdmissionFacts
    runtime: RuntimeFacts

    @classmethod
    def from_lock(cls, lock: Lock, lock_bytes: bytes) -> HostIdentity:
        """The identity a lock admits: its own digest, the Binding's, the contract, Bun."""
        return cls(
            admission=AdmissionFacts(
                lock_digest="sha256:" + hashlib.sha256(lock_bytes).hexdigest(),
                binding_digest=lock.binding_digest,
                descriptor=Descriptor(
                    id=lock.contract.id, version=lock.contract.version, digest=lock.contract.digest
                ),
            ),
            runtime=RuntimeFacts(
                bun_version=lock.runtime.bun_version,
                bun_sha256="sha256:" + lock.runtime.bun_sha256.removeprefix("sha256:"),
            ),
        )


@dataclass(frozen=True)
class RunRecord:
    """One completed run as the host saw it, everything its statement says."""

    run: RunFacts
    kind: str
    enforced: Enforced
    plan_digest: str
    evidence: Evidence
    stdout: bytes
    stderr: bytes
    # None: signed before the envelope proved its release (the row's first commit of it).
    resources: ResourceReport | None
    started_unix_ms: int
    finished_unix_ms: int
    # The test names from Bun's JUnit report when it wrote one; else read from its console.
    tests: TestReport | None = None


@dataclass(frozen=True)
class JarvisRecord:
    """One completed jarvis run as the host saw it, everything its statement says."""

    run: JarvisRunFacts
    request: JarvisRequestFactsV2
    policy: JarvisPolicyFacts
    enforced: Enforced
    plan_digest: str
    exit_code: int | None
    signal: str | None
    stop_reason: StopReason
    # The streams as `jarvis.run.get` returns them, and their bytes as captured.
    stdout_text: StreamText
    stderr_text: StreamText
    stdout: bytes
    stderr: bytes
    resources: ResourceReport
    started_unix_ms: int
    finished_unix_ms: int


class Attester:
    """Signs the statements of one host's runs with its key.

    `identity` is what a Project Command front admits (its lock); jarvis has none.
    """

    def __init__(self, key: SigningKey, identity: HostIdentity | None = None) -> None:
        self.key = key
        self.identity = identity
        self._keyid = key.public.keyid

    @property
    def keyid(self) -> str:
        """The signing key's id."""
        return self._keyid

    def attest(self, record: RunRecord) -> bytes:
        """The run's bundle: its statement, and for a test command its test result, signed."""
        statement = self.run_statement(record)
        body = _encode(statement)
        envelopes = [dsse.sign(body, self.key.sign, self._keyid)]
        if record.kind == "test":
            assert self.identity is not None  # run_statement needs it first
            evidence = record.evidence
            report = record.tests or read_console_report(
                evidence.stderr.text,
                evidence.exit_code,
                test_files=command_files(evidence.invocation),
            )
            tests = test_result_statement(
                candidate=statement.subject[0],
                passed=evidence.stop_reason == "exited" and evidence.exit_code == 0,
                report=report,
                run_statement_sha256=hashlib.sha256(body).hexdigest(),
                admission=self.identity.admission,
            )
            tests_body = _encode(tests)
            envelopes.append(dsse.sign(tests_body, self.key.sign, self._keyid))
        return dsse.encode_bundle(envelopes)

    def attest_jarvis(self, record: JarvisRecord) -> bytes:
        """A jarvis run's bundle: its one statement (jarvis-run/v2), signed."""
        statement = JarvisRunStatementV2(
            type_=STATEMENT_TYPE,
            subject=[
                stream_subject("stdout", record.stdout_text.text),
                stream_subject("stderr", record.stderr_text.text),
            ],
            predicate_type=JARVIS_V2_PREDICATE_TYPE,
            predicate=JarvisRunPredicateV2(
                run=record.run,
                request=record.request,
                policy=record.policy,
                envelope=_envelope(record.enforced, record.plan_digest),
                ending=EndingFacts(
                    exit_code=record.exit_code,
                    signal=record.signal,
                    stop_reason=record.stop_reason,
                    cleanup="complete",
                    resources=record.resources,
                    stdout=_stream(record.stdout, record.stdout_text.truncated),
                    stderr=_stream(record.stderr, record.stderr_text.truncated),
                ),
                started_on=rfc3339(record.started_unix_ms),
                finished_on=rfc3339(record.finished_unix_ms),
                host=HostFacts(key_id=self._keyid, jigcmd_version=__version__),
            ),
        )
        return dsse.encode_bundle([dsse.sign(_encode(statement), self.key.sign, self._keyid)])

    def run_statement(self, record: RunRecord) -> RunStatement:
        """The jigcmd run statement of `record` (unsigned)."""
        if self.identity is None:
            raise ValueError("a Project Command statement needs the admission identity")
        evidence = record.evidence
        candidate = ResourceDescriptor(
            name="candidate",
            digest={"sha256": evidence.candidate_digest.removeprefix("sha256:")},
            media_type="application/vnd.jigcmd.candidate+json",
        )
        predicate = RunPredicate(
            run=record.run,
            command=CommandFacts(
                name=evidence.command,
                kind="test" if record.kind == "test" else "run",
                invocation=list(evidence.invocation),
            ),
            admission=self.identity.admission,
            runtime=self.identity.runtime,
            envelope=_envelope(record.enforced, record.plan_digest),
            ending=EndingFacts(
                exit_code=evidence.exit_code,
                signal=evidence.signal,
                stop_reason=evidence.stop_reason,
                cleanup="unconfirmed" if record.resources is None else "complete",
                resources=record.resources,
                stdout=_stream(record.stdout, evidence.stdout.truncated),
                stderr=_stream(record.stderr, evidence.stderr.truncated),
            ),
            stdin_digest=evidence.stdin_digest,
            started_on=rfc3339(record.started_unix_ms),
            finished_on=rfc3339(record.finished_unix_ms),
            host=HostFacts(key_id=self._keyid, jigcmd_version=__version__),
        )
        return RunStatement(
            type_=STATEMENT_TYPE,
            subject=[
                candidate,
                stream_subject("stdout", evidence.stdout.text),
                stream_subject("stderr", evidence.stderr.text),
            ],
            predicate_type=RUN_PREDICATE_TYPE,
            predicate=predicate,
        )


def _envelope(enforced: Enforced, plan_digest: str) -> EnvelopeFacts:
    limits = enforced.limits
    return EnvelopeFacts(
        profile="host" if enforced.profile == "host" else "candidate",
        namespaces=list(enforced.namespaces),
        limits=EnforcedLimits(
            memory_bytes=limits.memory_bytes,
            pids_max=limits.pids_max,
            cpu_quota_us=limits.cpu_quota_us,
            cpu_period_us=limits.cpu_period_us,
            scratch_bytes=limits.scratch_bytes,
            nofile=limits.nofile,
            fsize_bytes=limits.fsize_bytes,
        ),
        seccomp_filter_sha256=enforced.seccomp_filter_sha256,
        cpus=list(enforced.cpus),
        rootless=enforced.rootless,
        plan_digest=plan_digest,
    )


def _stream(data: bytes, truncated: bool) -> StreamFacts:
    return StreamFacts(
        captured_bytes=len(data),
        captured_sha256=hashlib.sha256(data).hexdigest(),
        truncated=truncated,
    )
