"""One planned run executed: its caller told what it prints meanwhile, its end made a result."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Final

import anyio

from jigcmd.command.failures import envelope_error, stopped_error
from jigcmd.command.outcomes import Sign, tests_of
from jigcmd.envelope.api import EnvelopeFailure, Executor, Hooks, RunOutcome, Ticket
from jigcmd.evidence import Evidence
from jigcmd.plan import RunPlan
from jigcmd.policy.request import ValidRequest
from jigcmd.protocol.commands import RunResult
from jigcmd.protocol.liveoutput import LiveOutput
from jigcmd.server.backend import Progress

__all__ = ["PROGRESS_EVERY_S", "execute"]

# A running call with a progress token hears of its output this often (at most 4 a second).
PROGRESS_EVERY_S: Final = 0.5


def _ms(seconds: float) -> int:
    """Whole milliseconds, never negative (progress counts elapsed and total time in them)."""
    return max(0, round(seconds * 1000))


async def _execute_live(
    execute: Callable[[Hooks], Awaitable[RunOutcome]],
    plan: RunPlan,
    hooks: Hooks | None,
    *,
    progress: Progress,
    begun: float,
) -> RunOutcome:
    """Run `execute` with these hooks, telling the caller what the command prints meanwhile."""
    live = LiveOutput(tests=plan.argv[1:2] == ("test",))
    hooks = dataclasses.replace(hooks or Hooks(), on_output=live.feed)
    total = _ms(plan.deadline - begun)

    # The run's end cancels the ticker's own scope, which the task absorbs: a task that
    # ends by a cancel keeps its frames, and through this closure the call's objects, in
    # a reference cycle until the garbage collector runs (docs/performance.md).
    ticker = anyio.CancelScope()

    async def tick() -> None:
        with ticker:
            while True:
                await anyio.sleep(PROGRESS_EVERY_S)
                await progress(live.message(), _ms(time.monotonic() - begun), total)

    failed: Exception | None = None
    async with anyio.create_task_group() as ticking:
        ticking.start_soon(tick)
        try:
            outcome = await execute(hooks)
        except Exception as exc:  # noqa: BLE001 - re-raised as is below, not as a group
            failed = exc
        finally:
            # Nothing is told after the run: the ticker ends before the result goes.
            ticker.cancel()
    if failed is not None:
        raise failed
    return outcome


async def execute(
    executor: Executor,
    ticket: Ticket,
    hooks: Hooks | None,
    *,
    valid: ValidRequest,
    plan: RunPlan,
    cancel: anyio.Event,
    progress: Progress | None,
    evidence: Callable[[RunOutcome], Evidence],
    sign: Sign | None,
    begun: float,
) -> RunResult:
    """Execute `plan` on `ticket`; its evidence, tests and statement, or the error it ended in.

    `evidence` makes the evidence of how it ended (the call's `EvidenceOf`).
    """
    if progress is not None:
        await progress(
            f"running {' '.join(valid.invocation)}",
            _ms(time.monotonic() - begun),
            _ms(plan.deadline - begun),
        )
    try:
        if progress is None:
            outcome = await executor.execute(plan, cancel, ticket, hooks)
        else:
            run = partial(executor.execute, plan, cancel, ticket)
            outcome = await _execute_live(run, plan, hooks, progress=progress, begun=begun)
    except EnvelopeFailure as failure:
        raise envelope_error(failure) from failure
    made = evidence(outcome)
    stopped = stopped_error(made, outcome.report)
    tests = tests_of(plan, outcome)
    attestation = None if sign is None else sign(outcome, outcome.report, tests)
    if stopped is not None:
        # It ran, and its end and cleanup are proved: its statement goes with the error.
        stopped.attestation = attestation
        raise stopped
    return RunResult(evidence=made, report=outcome.report, tests=tests, attestation=attestation)
