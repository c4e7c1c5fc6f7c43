"""A run's end made its evidence and its signed statements, each fact worked out once.

A run is signed twice: at its end (the journal's crash insurance) and once its cleanup is
proved (the answer's). Both signings, the journal's record and the answer describe one
ending, so its evidence is made once and its console test names are read once.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Collection
from typing import Any

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from jigcmd.attest import testreport
from jigcmd.attest.attester import Attester, HostIdentity
from jigcmd.attest.keys import SigningKey
from jigcmd.attest.statement import AdmissionFacts, Descriptor, RuntimeFacts
from jigcmd.attest.statement import TestReport as Report
from jigcmd.command import outcomes
from jigcmd.command.durability import Durability
from jigcmd.command.outcomes import EvidenceOf, Sign, signer
from jigcmd.command.runtime import BUN_TARGET
from jigcmd.envelope.api import CapturedStream, Ending, RunOutcome
from jigcmd.evidence import ResourceReport
from jigcmd.plan import RunPlan
from jigcmd.policy.binding import CommandPolicy
from jigcmd.policy.planner import candidate_plan
from jigcmd.policy.request import ValidRequest
from jigcmd.protocol.commands import TestResults as Results
from jigcmd.protocol.junit import parse_junit

SHA = "sha256:" + "ab" * 32
# When the call's deadline started (Unix ms): what the signer is told.
STARTED = 1_780_000_000_123
STDERR = b"\ntest/a.test.ts:\n(pass) math > adds [0.02ms]\n(fail) math > fails [9.58ms]\n"
JUNIT = b"""<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="bun test" tests="1" failures="0">
  <testsuite name="test/a.test.ts" file="test/a.test.ts" tests="1" failures="0">
    <testcase name="only" classname="" time="0.001" file="test/a.test.ts" line="1"/>
  </testsuite>
</testsuites>
"""
REPORT = ResourceReport(
    wall_ms=91.5,
    setup_ms=20.25,
    cpu_ms=8.0,
    peak_memory_bytes=3_891_200,
    oom_killed=False,
    pids_limit_hit=False,
    deadline_hit=False,
)


def _valid() -> ValidRequest:
    command = CommandPolicy(name="tests", kind="test", paths=("test/a.test.ts",))
    return ValidRequest(
        command=command,
        files=(("test/a.test.ts", "test('adds', () => {});\n"),),
        args=(),
        stdin="",
        candidate_digest=SHA,
        stdin_digest=SHA,
        invocation=command.invocation(),
    )


def _plan() -> RunPlan:
    return candidate_plan(
        bun=BUN_TARGET,
        runtime_binds=(),
        kind="test",
        paths=["test/a.test.ts"],
        args=[],
        files=(("test/a.test.ts", "test('adds', () => {});\n"),),
        stdin="",
        deadline=time.monotonic() + 10,
    )


def _ending(stderr: bytes = STDERR, exit_code: int = 1) -> Ending:
    # `bytes(...)` copies: the end's and the outcome's captures are distinct objects.
    return Ending(
        stdout=CapturedStream(data=b"bun test\n", truncated=False),
        stderr=CapturedStream(data=bytes(bytearray(stderr)), truncated=False),
        exit_code=exit_code,
        signal=None,
        stop_reason="exited",
    )


def _outcome(ending: Ending) -> RunOutcome:
    return RunOutcome(
        stdout=CapturedStream(data=bytes(bytearray(ending.stdout.data)), truncated=False),
        stderr=CapturedStream(data=bytes(bytearray(ending.stderr.data)), truncated=False),
        exit_code=ending.exit_code,
        signal=ending.signal,
        stop_reason=ending.stop_reason,
        report=REPORT,
    )


def _attester() -> Attester:
    identity = HostIdentity(
        admission=AdmissionFacts(
            lock_digest=SHA,
            binding_digest=SHA,
            descriptor=Descriptor(id="https://jig.md/contracts/x", version="1.0.0", digest=SHA),
        ),
        runtime=RuntimeFacts(bun_version="1.4.2", bun_sha256=SHA),
    )
    return Attester(SigningKey(Ed25519PrivateKey.generate(), "test"), identity)


def _statements(bundle: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(base64.b64decode(json.loads(line)["payload"]))
        for line in bundle.decode().splitlines()
    ]


def _signer() -> Sign:
    """The example's signer, with the call's one evidence maker."""
    valid = _valid()
    durability = Durability(None, operation_id="op-1", signature=None, root_run="", context="")
    sign = signer(
        valid,
        _plan(),
        durability,
        "op-1",
        "run-1",
        attester=_attester(),
        digest=lambda: SHA,
        evidence=EvidenceOf(valid),
        started_unix_ms=STARTED,
    )
    assert sign is not None
    return sign


def test_a_runs_end_and_its_outcome_make_one_evidence() -> None:
    """The same output and end give the same `Evidence`; a different end gives its own."""
    evidence = EvidenceOf(_valid())
    ending = _ending()
    first = evidence(ending)
    assert evidence(_outcome(ending)) is first
    assert first.stderr.text == STDERR.decode()
    assert first.exit_code == 1
    other = evidence(_ending(stderr=b"(pass) other [1ms]\n", exit_code=0))
    assert other is not first
    assert other.stderr.text == "(pass) other [1ms]\n"
    assert other.exit_code == 0


def test_both_signings_name_the_console_tests_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a JUnit report, both statements name the console's tests, read one time."""
    reads: list[str] = []

    def counted(
        stderr: str,
        exit_code: int | None,
        tail: str = "",
        missing: str = "",
        *,
        test_files: Collection[str] = (),
    ) -> Report:
        reads.append(stderr)
        return testreport.read_console_report(
            stderr, exit_code, tail, missing, test_files=test_files
        )

    monkeypatch.setattr(outcomes, "read_console_report", counted)
    sign = _signer()
    ending = _ending()
    at_end = _statements(sign(ending, None, None))
    at_close = _statements(sign(_outcome(ending), REPORT, None))
    assert reads == [STDERR.decode()]
    for statements in (at_end, at_close):
        tests = statements[1]["predicate"]
        assert tests["passedTests"] == ["test/a.test.ts > math > adds"]
        assert tests["failedTests"] == ["test/a.test.ts > math > fails"]
    assert at_end[0]["predicate"]["ending"]["cleanup"] == "unconfirmed"
    assert at_close[0]["predicate"]["ending"]["cleanup"] == "complete"
    # Both say the instant the call's deadline started, whenever they are signed.
    for statements in (at_end, at_close):
        assert statements[0]["predicate"]["startedOn"] == "2026-05-28T20:26:40.123Z"


def test_past_the_stderr_cap_the_signed_console_report_reads_the_footer_in_the_tail() -> None:
    """No report, stderr cut at its cap: the footer past it counts a file that did not load."""
    footer = b"\n 1 pass\n 2 fail\n 1 error\nRan 3 tests across 2 files. [9.00ms]\n"
    cut = CapturedStream(data=STDERR, truncated=True, tail=footer)
    outcome = msgspec.structs.replace(_outcome(_ending()), stderr=cut)
    tests = _statements(_signer()(outcome, REPORT, None))[1]["predicate"]
    assert tests["failedTests"] == [
        "test/a.test.ts > math > fails",
        "(unhandled error between tests)",
    ]


def test_the_junit_report_names_the_tests_when_bun_wrote_one() -> None:
    """A parsed JUnit report at the close takes the place of the console's lines."""
    sign = _signer()
    ending = _ending()
    junit = Results(report=parse_junit(JUNIT), raw=JUNIT)
    tests = _statements(sign(_outcome(ending), REPORT, junit))[1]["predicate"]
    assert tests["passedTests"] == ["test/a.test.ts > only"]
    assert tests["failedTests"] == []
    unreadable = Results(report=None, problem="unreadable: no", raw=b"<")
    fallback = _statements(sign(_outcome(ending), REPORT, unreadable))[1]["predicate"]
    assert fallback["failedTests"] == ["test/a.test.ts > math > fails"]
