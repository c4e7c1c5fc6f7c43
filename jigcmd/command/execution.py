"""One planned run executed: its caller told what it prints meanwhile, its end made a result."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from functools import partial

import anyio

from jigcmd.cancel import CancelSignal
from jigcmd.command.failures import StoppedRun, envelope_error, stopped_error, unread_end
from jigcmd.command.outcomes import Sign, output_ends, tests_of
from jigcmd.envelope.api import EnvelopeFailure, Executor, Hooks, RunOutcome, Ticket
from jigcmd.evidence import Evidence
from jigcmd.plan import RunPlan
from jigcmd.policy.request import ValidRequest
from jigcmd.protocol.commands import RunResult
from jigcmd.protocol.invocation import cut_arguments, invocation_line
from jigcmd.protocol.liveoutput import LiveOutput
from jigcmd.server.backend import PROGRESS_EVERY_S, Progress

__all__ = ["execute"]


def _ms(seconds: float) -> int:
    """Whole milliseconds, never negative (progress counts elapsed and total time in them)."""
    return max(0, round(seconds * 1000))


class _Ticker:
    """Tells the caller every `PROGRESS_EVERY_S`, one telling at a time, from the loop's timer.

    A run shorter than a tick (most) spawns nothing, and no task is cancelled at its end: a
    task ended by a cancel keeps its frames, and through them the call's objects, in a
    reference cycle until the garbage collector runs (docs/performance.md).
    """

    def __init__(self, telling: anyio.abc.TaskGroup, tell: Callable[[], Awaitable[None]]) -> None:
        self._telling = telling
        self._tell = tell
        self._busy = False
        self._loop = asyncio.get_running_loop()
        self._timer = self._loop.call_later(PROGRESS_EVERY_S, self._tick)

    def stop(self) -> None:
        """No tick after this (cancelling the timer drops its reference to this ticker)."""
        self._timer.cancel()

    def _tick(self) -> None:
        if not self._busy:
            self._busy = True
            self._telling.start_soon(self._told)
        self._timer = self._loop.call_later(PROGRESS_EVERY_S, self._tick)

    async def _told(self) -> None:
        try:
            await self._tell()
        finally:
            self._busy = False


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
    failed: Exception | None = None

    async def tell() -> None:
        await progress(live.message(), _ms(time.monotonic() - begun), total)

    async with anyio.create_task_group() as telling:
        ticker = _Ticker(telling, tell)
        try:
            outcome = await execute(hooks)
        except Exception as exc:  # noqa: BLE001 - re-raised as is below, not as a group
            failed = exc
        finally:
            # Nothing is told after the run: no tick comes after its end, and the group
            # waits for the one being told before the result goes.
            ticker.stop()
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
    cancel: CancelSignal,
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
            # The arguments are the caller's: cut and quoted as a tool result's text shows them.
            f"running {invocation_line(*cut_arguments(valid.invocation))}",
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
        raise envelope_error(failure, deadline_stop=cancel.deadline_passed()) from failure
    try:
        ended = _ended(plan, outcome, evidence, sign, waiters_deadline=cancel.deadline_passed())
    except Exception as exc:
        # A bug here must still close the operation, with the cleanup it proved.
        raise unread_end(exc) from exc
    if isinstance(ended, StoppedRun):
        raise ended
    return ended


def _ended(
    plan: RunPlan,
    outcome: RunOutcome,
    evidence: Callable[[RunOutcome], Evidence],
    sign: Sign | None,
    *,
    waiters_deadline: bool,
) -> RunResult | StoppedRun:
    """The result of a run that ended with its cleanup proved, or the error it stopped with."""
    made = evidence(outcome)
    stopped = stopped_error(made, outcome.report, waiters_deadline=waiters_deadline)
    tests = tests_of(plan, outcome, made)
    attestation = None if sign is None else sign(outcome, outcome.report, tests)
    ends = output_ends(outcome)
    if stopped is not None:
        # It ran, and its end and cleanup are proved: its statement goes with the error.
        stopped.attestation = attestation
        stopped.ends = ends
        stopped.tests = tests
        return stopped
    return RunResult(
        evidence=made, report=outcome.report, tests=tests, attestation=attestation, ends=ends
    )
