"""What a detailed call (MCP, `run --json`) adds to a run, and what a Run/1 call's keeps.

Every test command has Bun write its JUnit report (the signed test result is read from it);
a detailed call also answers its per-test results and keeps its resources, Run/1 neither.

A stub executor records the plan and plays the envelope's side (the scratch file read back,
output while it runs), so the test sees exactly what the service plans and returns.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import msgspec
import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.command.runtime import BunBinary
from jigcmd.command.service import CommandService
from jigcmd.durable.ownership import Ownership
from jigcmd.envelope.api import EnvelopeFailure, FailureKind, Hooks, RunOutcome, ScratchRead, Ticket
from jigcmd.errors import Code, JigError
from jigcmd.plan import RunPlan
from jigcmd.policy.binding import CommandPolicy
from jigcmd.policy.lock import ADMITTED
from jigcmd.protocol.junit import REPORT_NAME
from tests.garbage import cyclic_garbage
from tests.jarvis.jarvis_harness import outcome

JUNIT = (
    b'<?xml version="1.0" encoding="UTF-8"?><testsuites><testsuite name="t.test.ts" '
    b'file="t.test.ts"><testcase name="ok" time="0.001" file="t.test.ts" line="2"/>'
    b"</testsuite></testsuites>"
)
COMMANDS = {
    "tests": CommandPolicy(name="tests", kind="test", paths=("t.test.ts",)),
    "main": CommandPolicy(name="main", kind="run", paths=("main.ts",)),
}


class _Stub:
    def __init__(self, scratch: ScratchRead | None = None, chunks: tuple[bytes, ...] = ()) -> None:
        self.plans: list[RunPlan] = []
        self.scratch = scratch
        self.chunks = chunks
        self.hooks: Hooks | None = None
        self.gate = anyio.Event()

    async def execute(
        self,
        plan: RunPlan,
        cancel: CancelSignal,
        ticket: Ticket | None = None,
        hooks: Hooks | None = None,
    ) -> RunOutcome:
        self.plans.append(plan)
        self.hooks = hooks
        if hooks is not None and hooks.on_output is not None:
            for chunk in self.chunks:
                hooks.on_output("stderr", chunk, True)
                await anyio.sleep(0.6)
        scratch = self.scratch if plan.scratch_file is not None else None
        return msgspec.structs.replace(outcome(b"out\n", exit_code=1), scratch_file=scratch)


def _service(stub: _Stub, tmp_path: Path | None = None) -> CommandService:
    service = CommandService(
        COMMANDS, admission=ADMITTED, runtime=BunBinary("/bin/true"), executor=stub
    )
    if tmp_path is not None:
        service.attach_ownership(
            Ownership.open(tmp_path / "state", max_envelopes=1, memory_bytes=256 << 20)
        )
    return service


TEST_INPUT = {"command": "tests", "files": {"t.test.ts": "x"}}


async def test_a_run1_call_has_bun_write_its_report_too_but_keeps_no_resources() -> None:
    """Its signed test result is read from the report (exact names); nothing is kept for
    `resources/read`, and no notes are made for it."""
    stub = _Stub(ScratchRead(JUNIT))
    result = await _service(stub).run(
        TEST_INPUT, operation_id="op", deadline_unix_ms=None, cancel=CancelSignal()
    )
    (plan,) = stub.plans
    assert "--reporter=junit" in plan.argv
    assert plan.scratch_file is not None and plan.scratch_file.name == REPORT_NAME
    assert result.tests is not None and result.tests.report is not None
    assert (result.resources, result.notes) == ((), ())


async def test_a_detailed_test_call_has_bun_write_one_junit_report_and_reads_it(
    tmp_path: Path,
) -> None:
    stub = _Stub(ScratchRead(JUNIT))
    service = _service(stub, tmp_path)
    result = await service.run(
        TEST_INPUT,
        operation_id="op",
        deadline_unix_ms=None,
        cancel=CancelSignal(),
        root_run="run-a",
        detailed=True,
    )
    (plan,) = stub.plans
    # Only the last --reporter applies: there is exactly one.
    assert [arg for arg in plan.argv if arg.startswith("--reporter")] == [
        "--reporter=junit",
        f"--reporter-outfile=/tmp/{REPORT_NAME}",
    ]
    assert plan.argv.index("--reporter=junit") < plan.argv.index("./t.test.ts")
    assert plan.scratch_file is not None and plan.scratch_file.name == REPORT_NAME
    assert result.tests is not None and result.tests.report is not None
    assert [t.name for t in result.tests.report.tests] == ["ok"]
    assert [ref.name for ref in result.resources] == ["stdout", "stderr", "junit"]
    junit = result.resources[2]
    data, mime = service.read_resource("run-a", junit.uri)
    assert (data, mime) == (JUNIT, "application/xml")
    with pytest.raises(LookupError):
        service.read_resource("run-b", junit.uri)


async def test_a_run_command_plans_no_report_even_when_detailed() -> None:
    stub = _Stub(ScratchRead(JUNIT))
    result = await _service(stub).run(
        {"command": "main", "files": {"main.ts": "1"}},
        operation_id="op",
        deadline_unix_ms=None,
        cancel=CancelSignal(),
        detailed=True,
    )
    assert stub.plans[0].scratch_file is None
    assert result.tests is None


@pytest.mark.parametrize(
    ("scratch", "problem"),
    [
        (ScratchRead(None, "missing"), "missing"),
        (ScratchRead(b"<nope"), "unreadable: not well-formed XML"),
        (ScratchRead(b'<!DOCTYPE x [<!ENTITY a "b">]><testsuites/>'), "unreadable: a document"),
    ],
)
async def test_a_report_that_cannot_be_read_is_reported_as_such(
    scratch: ScratchRead, problem: str
) -> None:
    result = await _service(_Stub(scratch)).run(
        TEST_INPUT, operation_id="op", deadline_unix_ms=None, cancel=CancelSignal(), detailed=True
    )
    assert result.tests is not None and result.tests.report is None
    assert result.tests.problem.startswith(problem)


async def test_a_call_with_progress_hears_the_output_while_it_runs_and_nothing_after() -> None:
    heard: list[tuple[str, int | None, int | None]] = []

    async def progress(
        message: str, elapsed_ms: int | None = None, total_ms: int | None = None
    ) -> None:
        heard.append((message, elapsed_ms, total_ms))

    stub = _Stub(ScratchRead(JUNIT), chunks=(b"(pass) a [1ms]\n", b"(pass) b\n(fail) c\n", b""))
    await _service(stub).run(
        TEST_INPUT,
        operation_id="op",
        deadline_unix_ms=None,
        cancel=CancelSignal(),
        progress=progress,
        detailed=True,
    )
    messages = [message for message, _e, _t in heard]
    assert messages[0] == "running bun test t.test.ts"
    counted = "its console printed {} '(pass)' and {} '(fail)' lines so far (not a verified count)"
    assert counted.format(1, 0) in messages
    assert messages[-1] == counted.format(2, 1)
    assert all(total is not None and total > 9_000 for _m, _e, total in heard)
    count = len(heard)
    await anyio.sleep(1.2)
    assert len(heard) == count


async def test_a_queued_call_waits_past_the_ceiling_and_then_gets_its_whole_ceiling(
    tmp_path: Path,
) -> None:
    """The wait is bounded by --queue-wait, not the command's 10 s: the plan starts afresh."""
    stub = _Stub()
    service = _service(stub, tmp_path)
    ownership = Ownership.open(tmp_path / "state", max_envelopes=1, memory_bytes=256 << 20)
    held = ownership.reserve("holder")
    service.set_queue_wait(30.0)
    async with anyio.create_task_group() as tg:

        async def call() -> None:
            await service.run(
                TEST_INPUT,
                operation_id="queued",
                deadline_unix_ms=None,
                cancel=CancelSignal(),
                wait_for_slot=True,
            )

        tg.start_soon(call)
        # Past the command's own 10 s ceiling would be too slow for a unit test: instead the
        # slot is given back after a moment and the plan's deadline must be 10 s from then.
        await anyio.sleep(0.3)
        freed = time.monotonic()
        ownership.release(held)
    (plan,) = stub.plans
    assert plan.deadline >= freed + 9.5


async def test_a_queued_call_gives_up_at_the_queue_limit_with_a_clear_refusal(
    tmp_path: Path,
) -> None:
    stub = _Stub()
    service = _service(stub, tmp_path)
    ownership = Ownership.open(tmp_path / "state", max_envelopes=1, memory_bytes=256 << 20)
    held = ownership.reserve("holder")
    service.set_queue_wait(0.3)
    with pytest.raises(JigError) as refused:
        await service.run(
            TEST_INPUT,
            operation_id="queued",
            deadline_unix_ms=None,
            cancel=CancelSignal(),
            wait_for_slot=True,
        )
    ownership.release(held)
    assert refused.value.code == Code.RESOURCE_EXHAUSTED and not refused.value.recorded
    assert refused.value.message.startswith(
        "no envelope slot came free within the 0.3 s a call may wait (serve --queue-wait; all 1 "
    )
    assert "nothing ran" in refused.value.message
    assert str(tmp_path) not in refused.value.message
    assert stub.plans == []


class _Failing(_Stub):
    async def execute(
        self,
        plan: RunPlan,
        cancel: CancelSignal,
        ticket: Ticket | None = None,
        hooks: Hooks | None = None,
    ) -> RunOutcome:
        raise EnvelopeFailure(FailureKind.SETUP_FAILED, "cgroup", "refused")


async def _unheard(
    message: str, elapsed_ms: int | None = None, total_ms: int | None = None
) -> None:
    """A progress callback that listens to nothing."""


async def test_a_call_told_its_progress_is_freed_without_the_garbage_collector() -> None:
    """The ticker ends without a cancel: no reference cycle keeps the call's objects."""
    with cyclic_garbage() as kept:
        await _service(_Stub(ScratchRead(JUNIT))).run(
            TEST_INPUT,
            operation_id="op",
            deadline_unix_ms=None,
            cancel=CancelSignal(),
            progress=_unheard,
            detailed=True,
        )
    assert kept.isdisjoint({"LiveOutput", "RunPlan", "ValidRequest"})


async def test_an_envelope_failure_while_progress_is_told_is_the_same_refusal() -> None:
    """The progress ticker never turns the envelope's own failure into another error."""
    with pytest.raises(JigError) as failed:
        await _service(_Failing()).run(
            TEST_INPUT,
            operation_id="op",
            deadline_unix_ms=None,
            cancel=CancelSignal(),
            progress=_unheard,
        )
    assert failed.value.code == Code.EXECUTION_FAILED


async def test_a_queued_call_whose_own_deadline_comes_first_is_deadline_exceeded(
    tmp_path: Path,
) -> None:
    """The caller's deadline before the queue limit: the wait ends there, as DEADLINE_EXCEEDED."""
    stub = _Stub()
    service = _service(stub, tmp_path)
    ownership = Ownership.open(tmp_path / "state", max_envelopes=1, memory_bytes=256 << 20)
    held = ownership.reserve("holder")
    service.set_queue_wait(60.0)
    with pytest.raises(JigError) as refused:
        await service.run(
            TEST_INPUT,
            operation_id="queued",
            deadline_unix_ms=time.time_ns() // 1_000_000 + 300,
            cancel=CancelSignal(),
            wait_for_slot=True,
        )
    ownership.release(held)
    assert refused.value.code == Code.DEADLINE_EXCEEDED
    assert stub.plans == []
