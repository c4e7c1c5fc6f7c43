"""The in-toto Statement v1 of one run: its subjects, the jigcmd run predicate, test-result/v0.1.

Pure: values in, a `Statement` out. The jigcmd predicate (`RUN_PREDICATE_TYPE`) says which
candidate ran, under which admission and runtime, in which envelope as enforced, and how it
ended; its JSON Schema is `schemas/run-predicate.v1.schema.json`, generated from these types.
A test command's run also gets a `test-result/v0.1` statement, whose test names come from the
runner's report: the host collected it, the candidate's code produced it, and the statement
says so (see `TestReport`).

A jarvis run's predicate is `JARVIS_V2_PREDICATE_TYPE`; jigcmd made `JARVIS_PREDICATE_TYPE`
(v1) before its statements named the executable, and still reads it: journals keep them.
"""

from __future__ import annotations

import hashlib
import time
from typing import Annotated, Final, Literal

import msgspec

from jigcmd.evidence import ResourceReport, StopReason

__all__ = [
    "JARVIS_PREDICATE_TYPE",
    "JARVIS_V2_PREDICATE_TYPE",
    "RUN_PREDICATE_TYPE",
    "STATEMENT_TYPE",
    "TEST_RESULT_TYPE",
    "AdmissionFacts",
    "CommandFacts",
    "Descriptor",
    "EndingFacts",
    "EnforcedLimits",
    "EnvelopeFacts",
    "HostFacts",
    "JarvisPolicyFacts",
    "JarvisRequestFacts",
    "JarvisRequestFactsV2",
    "JarvisRunFacts",
    "JarvisRunPredicate",
    "JarvisRunPredicateV2",
    "JarvisRunStatement",
    "JarvisRunStatementV2",
    "ResourceDescriptor",
    "RunFacts",
    "RunPredicate",
    "RunStatement",
    "RuntimeFacts",
    "StreamFacts",
    "TestReport",
    "TestResultPredicate",
    "TestResultStatement",
    "rfc3339",
    "stream_subject",
    "test_result_statement",
]

StatementType = Literal["https://in-toto.io/Statement/v1"]
RunPredicateType = Literal["https://jigcmd.dev/attestation/run/v1"]
JarvisPredicateType = Literal["https://jigcmd.dev/attestation/jarvis-run/v1"]
JarvisV2PredicateType = Literal["https://jigcmd.dev/attestation/jarvis-run/v2"]
TestResultType = Literal["https://in-toto.io/attestation/test-result/v0.1"]
STATEMENT_TYPE: Final[StatementType] = "https://in-toto.io/Statement/v1"
RUN_PREDICATE_TYPE: Final[RunPredicateType] = "https://jigcmd.dev/attestation/run/v1"
JARVIS_PREDICATE_TYPE: Final[JarvisPredicateType] = "https://jigcmd.dev/attestation/jarvis-run/v1"
JARVIS_V2_PREDICATE_TYPE: Final[JarvisV2PredicateType] = (
    "https://jigcmd.dev/attestation/jarvis-run/v2"
)
TEST_RESULT_TYPE: Final[TestResultType] = "https://in-toto.io/attestation/test-result/v0.1"

_Hex = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
_Sha256 = Annotated[str, msgspec.Meta(pattern="^sha256:[0-9a-f]{64}$")]
_Time = Annotated[str, msgspec.Meta(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")]


class ResourceDescriptor(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True, rename="camel"
):
    """in-toto's ResourceDescriptor, with the fields jigcmd fills (a name, digests, notes)."""

    name: str
    digest: dict[str, _Hex]
    media_type: str | None = None
    annotations: dict[str, str | bool] | None = None


class Descriptor(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The project-command contract the lock admitted: its id, version and digest."""

    id: str
    version: str
    digest: _Sha256


class AdmissionFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """Under which review the run was admitted: the lock file, the Binding, the contract."""

    lock_digest: _Sha256
    binding_digest: _Sha256
    descriptor: Descriptor


class RuntimeFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """The Bun runtime that ran the command (the lock pins both)."""

    bun_version: str
    bun_sha256: _Sha256


class EnforcedLimits(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """The envelope's resource ceilings, with their values."""

    memory_bytes: int
    pids_max: int
    cpu_quota_us: int
    cpu_period_us: int
    scratch_bytes: int
    nofile: int
    fsize_bytes: int


class EnvelopeFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """The envelope as enforced: its namespaces, limits, seccomp filter, CPU pin, and mode."""

    profile: Literal["candidate", "host"]
    namespaces: list[str]
    limits: EnforcedLimits
    seccomp_filter_sha256: _Hex
    cpus: list[int]
    rootless: bool
    plan_digest: _Sha256


class StreamFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """One output stream's retained bytes as captured: their count, SHA-256, and whether cut."""

    captured_bytes: int
    captured_sha256: _Hex
    truncated: bool


class EndingFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """How the run ended; `resources` and a `complete` cleanup once the envelope proved it."""

    exit_code: int | None
    signal: str | None
    stop_reason: StopReason
    # "unconfirmed": signed when the output was complete, before the envelope's release was
    # proved; a run whose release is then not proved keeps no statement at all.
    cleanup: Literal["complete", "unconfirmed"]
    resources: ResourceReport | None
    stdout: StreamFacts
    stderr: StreamFacts


class CommandFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Which Binding command ran, and exactly how it was invoked."""

    name: str
    kind: Literal["run", "test"]
    invocation: list[str]


class RunFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """Which run this was: its envelope run id, the caller's run and its operation id."""

    run_id: str
    caller_run: str | None
    operation_id: str


class HostFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """Who signed: the host key's id (SHA-256 of its public key, DER) and the jigcmd version."""

    key_id: _Hex
    jigcmd_version: str


class RunPredicate(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """The jigcmd run predicate, version 1 (`RUN_PREDICATE_TYPE`)."""

    run: RunFacts
    command: CommandFacts
    admission: AdmissionFacts
    runtime: RuntimeFacts
    envelope: EnvelopeFacts
    ending: EndingFacts
    stdin_digest: _Sha256
    started_on: _Time
    finished_on: _Time
    host: HostFacts


class RunStatement(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """An in-toto Statement v1 carrying the jigcmd run predicate."""

    type_: StatementType = msgspec.field(name="_type")
    subject: list[ResourceDescriptor]
    predicate_type: RunPredicateType
    predicate: RunPredicate


class JarvisRunFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """Which jarvis run this was: its id (`jarvis.run.get`) and its envelope's run id."""

    run_id: int
    envelope_run_id: str


# The jarvis predicate's version 1, no longer made, still read (journals keep its statements):
# its schema forbids fields it does not list, so naming the executable took a version 2. Its
# docstrings are its published schema's descriptions: left as they were.
class JarvisRequestFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What was asked: the tool, the argv and working directory, and who asked."""

    tool: str
    argv: list[str]
    cwd: str
    actor: str


class JarvisRequestFactsV2(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What was asked and what ran: the tool, the argv as the caller named it, the executable
    (the file the run executed: its `argv[0]` resolved, symlinks and all, as the policy
    matched it), the working directory (resolved; "" when none was asked), and who asked."""

    tool: str
    argv: list[str]
    executable: str
    cwd: str
    actor: str


class JarvisPolicyFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """Under which policy it was allowed: the policy file's SHA-256 and the rule that matched."""

    policy_digest: _Sha256
    matched_rule: str | None
    reason: str


class JarvisRunPredicate(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """The jigcmd jarvis run predicate, version 1 (`JARVIS_PREDICATE_TYPE`)."""

    run: JarvisRunFacts
    request: JarvisRequestFacts
    policy: JarvisPolicyFacts
    envelope: EnvelopeFacts
    ending: EndingFacts
    started_on: _Time
    finished_on: _Time
    host: HostFacts


class JarvisRunStatement(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """An in-toto Statement v1 carrying the jarvis run predicate; subjects: both streams."""

    type_: StatementType = msgspec.field(name="_type")
    subject: list[ResourceDescriptor]
    predicate_type: JarvisPredicateType
    predicate: JarvisRunPredicate


class JarvisRunPredicateV2(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """The jigcmd jarvis run predicate, version 2 (`JARVIS_V2_PREDICATE_TYPE`)."""

    run: JarvisRunFacts
    request: JarvisRequestFactsV2
    policy: JarvisPolicyFacts
    envelope: EnvelopeFacts
    ending: EndingFacts
    started_on: _Time
    finished_on: _Time
    host: HostFacts


class JarvisRunStatementV2(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """An in-toto Statement v1 carrying the jarvis run predicate v2; subjects: both streams."""

    type_: StatementType = msgspec.field(name="_type")
    subject: list[ResourceDescriptor]
    predicate_type: JarvisV2PredicateType
    predicate: JarvisRunPredicateV2


class TestReport(msgspec.Struct, frozen=True):
    """The test runner's own report of its tests, read from output the candidate controls."""

    # Not collected by pytest (its name starts with "Test").
    __test__ = False

    passed: tuple[str, ...]
    failed: tuple[str, ...]
    # Where the names were read: what the runner printed, or the report file it wrote.
    source: str
    source_sha256: str
    # Why the runner's report is not the whole result ("" when it is): of a failed run, an
    # unhandled error between tests (named among `failed`) or no failed test at all; of an
    # exit 0, failed tests all the same, or the report (or Bun's footer) missing.
    incomplete: str = ""
    # How its names read (`jigcmd.attest.testnames`): the report's `testNames` annotation.
    names: str = ""


class TestResultPredicate(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True, rename="camel"
):
    """in-toto's test-result/v0.1 predicate."""

    __test__ = False

    result: Literal["PASSED", "WARNED", "FAILED"]
    configuration: list[ResourceDescriptor]
    passed_tests: list[str]
    failed_tests: list[str]
    warned_tests: list[str] = []


class TestResultStatement(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """An in-toto Statement v1 carrying test-result/v0.1."""

    __test__ = False

    type_: StatementType = msgspec.field(name="_type")
    subject: list[ResourceDescriptor]
    predicate_type: TestResultType
    predicate: TestResultPredicate


def rfc3339(unix_ms: int) -> str:
    """`unix_ms` as an RFC 3339 UTC time with milliseconds, e.g. 2026-12-01T19:53:05.123Z."""
    # Formatted by hand: `datetime.strftime` cost ~10 µs a call in the server (each run's
    # statements name two times each, signed twice).
    seconds, millis = divmod(unix_ms, 1000)
    t = time.gmtime(seconds)
    return (
        f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}"
        f"T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{millis:03d}Z"
    )


def stream_subject(name: str, text: str) -> ResourceDescriptor:
    """One evidence stream's subject: the SHA-256 of its text exactly as the evidence has it."""
    return ResourceDescriptor(
        name=name,
        digest={"sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()},
        media_type="text/plain; charset=utf-8",
    )


def test_result_statement(
    *,
    candidate: ResourceDescriptor,
    passed: bool,
    report: TestReport,
    run_statement_sha256: str,
    admission: AdmissionFacts,
) -> TestResultStatement:
    """The test-result/v0.1 statement of a test command's run.

    `passed` is the host's fact (the runner exited 0, on its own); the test names are the
    runner's, and the configuration entry of its report says the candidate could alter them.
    `result` is PASSED only when both agree and the report is whole (`_result`).
    """
    notes: dict[str, str | bool] = {
        "candidateInfluenced": True,
        "collectedBy": "the jigcmd host",
        "producedBy": "the test runner, running the candidate's code",
        "note": "the test names come from here; result is PASSED only on the runner's "
        "host-collected exit 0 with no failed test and nothing incomplete",
    }
    if report.names:
        notes["testNames"] = report.names
    if report.incomplete:
        notes["incomplete"] = report.incomplete
    configuration = [
        ResourceDescriptor(
            name="jigcmd run statement",
            digest={"sha256": run_statement_sha256},
            media_type="application/vnd.in-toto+json",
        ),
        ResourceDescriptor(
            name="jigcmd.lock", digest={"sha256": admission.lock_digest.removeprefix("sha256:")}
        ),
        ResourceDescriptor(
            name=f"test runner report ({report.source})",
            digest={"sha256": report.source_sha256},
            annotations=notes,
        ),
    ]
    return TestResultStatement(
        type_=STATEMENT_TYPE,
        subject=[candidate],
        predicate_type=TEST_RESULT_TYPE,
        predicate=TestResultPredicate(
            result=_result(passed, report),
            configuration=configuration,
            passed_tests=list(report.passed),
            failed_tests=list(report.failed),
        ),
    )


def _result(passed: bool, report: TestReport) -> Literal["PASSED", "WARNED", "FAILED"]:
    """FAILED on a failing exit or a failed test; WARNED when the report is not whole.

    The names are the candidate's word: one can make its run look worse, never better than
    the exit status, so a failed test it names fails the result even after an exit 0.
    """
    if not passed or report.failed:
        return "FAILED"
    return "WARNED" if report.incomplete else "PASSED"
