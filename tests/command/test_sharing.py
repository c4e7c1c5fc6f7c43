"""An operation belongs to its live waiters: one cancel settles one waiter, the last stops it."""

from __future__ import annotations

import math
import time
from functools import partial

import anyio
import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.command.sharing import OthersWaiting, SharedOperations
from jigcmd.errors import Code, JigError
from jigcmd.protocol.commands import RunResult
from jigcmd.server.backend import Progress
from tests.protocol.fake_server import REPORT, canned_evidence

pytestmark = pytest.mark.anyio

KEY = ("run-1", "op-1")
RESULT = RunResult(canned_evidence("tests"), REPORT)


class FakeWork:
    """Work that completes when `finish` is set, or ends CANCELLED when stopped."""

    def __init__(self) -> None:
        self.started = 0
        self.stopped = 0
        self.running = anyio.Event()
        self.finish = anyio.Event()
        # Why it was stopped (`CancelSignal.cause`), once it was.
        self.cause: str | None = None
        self.stopping = anyio.Event()

    async def __call__(self, stop: CancelSignal, progress: Progress | None) -> RunResult:
        self.started += 1
        self.running.set()
        if progress is not None:
            await progress("running")
        async with anyio.create_task_group() as waiting:

            async def until(event: CancelSignal | anyio.Event) -> None:
                await event.wait()
                waiting.cancel_scope.cancel()

            waiting.start_soon(until, stop)
            waiting.start_soon(until, self.finish)
        if stop.is_set() and not self.finish.is_set():
            self.stopped += 1
            self.cause = stop.cause
            self.stopping.set()
            # As the journal records it: the operation's own outcome.
            raise JigError(
                Code.CANCELLED,
                "the command was cancelled",
                {"command": "the evidence"},
                recorded=True,
            )
        return RESULT


async def _attend(
    shared: SharedOperations,
    work: FakeWork,
    cancel: CancelSignal | CancelSignal,
    outcomes: dict[str, RunResult | JigError],
    name: str,
    *,
    deadline: float = math.inf,
    deadline_unix_ms: float | None = None,
    signature: str = "sig",
    progress: Progress | None = None,
    others: OthersWaiting | None = None,
) -> None:
    """Attend as `name`; the deadlines are compared as `deadline_unix_ms`, else as `deadline`."""
    compared = deadline if deadline_unix_ms is None else deadline_unix_ms
    try:
        outcomes[name] = await shared.attend(
            KEY,
            signature,
            deadline=deadline,
            deadline_unix_ms=compared,
            cancel=cancel,
            progress=progress,
            work=work,
            others=others,
        )
    except JigError as error:
        outcomes[name] = error


async def _settled(
    outcomes: dict[str, RunResult | JigError], name: str, *, past: float | None = None
) -> None:
    """Until the waiter `name` has its answer (every task blocked, so it is not coming).

    With `past`, the answer is due at that (monotonic) deadline: the wait starts after it.
    """
    if past is not None:
        await anyio.sleep(max(0.0, past - time.monotonic()))
    await anyio.wait_all_tasks_blocked()
    assert name in outcomes


async def test_cancelling_the_first_waiter_answers_it_alone_and_the_joiner_gets_the_result() -> (
    None
):
    """The request that started the work leaves; the work goes on and completes for the other."""
    shared, work = SharedOperations(), FakeWork()
    first, joiner = CancelSignal(), CancelSignal()
    outcomes: dict[str, RunResult | JigError] = {}
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(_attend, shared, work, first, outcomes, "first")
        await work.running.wait()
        tasks.start_soon(_attend, shared, work, joiner, outcomes, "joiner")
        await anyio.wait_all_tasks_blocked()
        first.set()
        await _settled(outcomes, "first")
        left = outcomes["first"]
        assert isinstance(left, JigError) and left.code == Code.CANCELLED and not left.recorded
        assert "continues for its other callers" in left.message
        assert shared.running(KEY) and work.stopped == 0
        work.finish.set()
    assert outcomes["joiner"] == RESULT
    assert (work.started, work.stopped) == (1, 0)
    assert not shared.running(KEY)


async def test_cancelling_the_joiner_leaves_the_first_to_complete() -> None:
    """A joined waiter leaves; the first waiter gets the completed result."""
    shared, work = SharedOperations(), FakeWork()
    first, joiner = CancelSignal(), CancelSignal()
    outcomes: dict[str, RunResult | JigError] = {}
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(_attend, shared, work, first, outcomes, "first")
        await work.running.wait()
        tasks.start_soon(_attend, shared, work, joiner, outcomes, "joiner")
        await anyio.wait_all_tasks_blocked()
        joiner.set()
        await _settled(outcomes, "joiner")
        work.finish.set()
    left = outcomes["joiner"]
    assert isinstance(left, JigError) and left.code == Code.CANCELLED and not left.recorded
    assert outcomes["first"] == RESULT
    assert work.stopped == 0


async def test_cancelling_every_waiter_stops_the_work_once_and_the_last_gets_its_outcome() -> None:
    """Both leave: the work stops once; the last waiter is answered with how it ended."""
    shared, work = SharedOperations(), FakeWork()
    first, joiner = CancelSignal(), CancelSignal()
    outcomes: dict[str, RunResult | JigError] = {}
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(_attend, shared, work, first, outcomes, "first")
        await work.running.wait()
        tasks.start_soon(_attend, shared, work, joiner, outcomes, "joiner")
        await anyio.wait_all_tasks_blocked()
        first.set()
        await _settled(outcomes, "first")
        joiner.set()
    assert work.stopped == 1
    last = outcomes["joiner"]
    assert isinstance(last, JigError) and last.code == Code.CANCELLED and last.recorded
    assert last.details == {"command": "the evidence"}


async def test_a_waiter_whose_earlier_deadline_passes_leaves_alone() -> None:
    """A joiner's own deadline, earlier than the work's, ends only its wait."""
    shared, work = SharedOperations(), FakeWork()
    outcomes: dict[str, RunResult | JigError] = {}
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(_attend, shared, work, CancelSignal(), outcomes, "first")
        await work.running.wait()
        soon = time.monotonic() + 0.05
        tasks.start_soon(
            partial(_attend, deadline=soon), shared, work, CancelSignal(), outcomes, "joiner"
        )
        await _settled(outcomes, "joiner", past=soon)
        work.finish.set()
    left = outcomes["joiner"]
    assert isinstance(left, JigError) and left.code == Code.DEADLINE_EXCEEDED and not left.recorded
    assert outcomes["first"] == RESULT


async def test_the_last_waiter_whose_earlier_deadline_passes_stops_the_work() -> None:
    """When the one waiter left has an earlier deadline than the work's, it passing stops it."""
    shared, work = SharedOperations(), FakeWork()
    first = CancelSignal()
    outcomes: dict[str, RunResult | JigError] = {}
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(_attend, shared, work, first, outcomes, "first")
        await work.running.wait()
        # Far enough off for the first waiter to have left by then, even on a loaded machine.
        soon = time.monotonic() + 1.0
        tasks.start_soon(
            partial(_attend, deadline=soon), shared, work, CancelSignal(), outcomes, "joiner"
        )
        await anyio.wait_all_tasks_blocked()
        first.set()
    # Stopped as at a deadline: nobody cancelled it (the run's end then says `deadline`).
    assert (work.stopped, work.cause) == (1, "deadline")
    last = outcomes["joiner"]
    assert isinstance(last, JigError) and last.code == Code.CANCELLED and last.recorded


async def test_a_waiter_whose_deadline_is_the_works_own_waits_for_the_work() -> None:
    """A deadline no earlier than the work's never ends the wait first: the work's end answers."""
    shared, work = SharedOperations(), FakeWork()
    outcomes: dict[str, RunResult | JigError] = {}
    deadline = time.monotonic() + 0.02
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(
            partial(_attend, deadline=deadline), shared, work, CancelSignal(), outcomes, "first"
        )
        await work.running.wait()
        while time.monotonic() < deadline + 0.03:
            await anyio.wait_all_tasks_blocked()
        assert "first" not in outcomes and work.stopped == 0
        work.finish.set()
    assert outcomes["first"] == RESULT


async def test_a_joiner_with_the_works_deadline_waits_whatever_its_monotonic_time() -> None:
    """The same deadline in the callers' clock is the work's, though converted to monotonic
    time a moment later it came out earlier: the joiner waits for the work's outcome."""
    shared, work = SharedOperations(), FakeWork()
    outcomes: dict[str, RunResult | JigError] = {}
    same = time.time_ns() // 1_000_000 + 60_000
    first = partial(_attend, deadline=time.monotonic() + 60, deadline_unix_ms=same)
    soon = time.monotonic() + 0.02
    joiner = partial(_attend, deadline=soon, deadline_unix_ms=same)
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(first, shared, work, CancelSignal(), outcomes, "first")
        await work.running.wait()
        tasks.start_soon(joiner, shared, work, CancelSignal(), outcomes, "joiner")
        while time.monotonic() < soon + 0.03:
            await anyio.wait_all_tasks_blocked()
        assert "joiner" not in outcomes and work.stopped == 0
        work.finish.set()
    assert outcomes == {"first": RESULT, "joiner": RESULT}


async def _arrive_then_attend(
    shared: SharedOperations,
    work: FakeWork,
    outcomes: dict[str, RunResult | JigError],
    checked: anyio.Event,
    *,
    attend: bool = True,
) -> None:
    """A call that reached the service, whose checks end when `checked` is set."""
    with shared.arriving(KEY, "sig") as arrival:
        await checked.wait()
        if not attend:
            return  # refused by its checks: it never attends
        try:
            outcomes["joiner"] = await arrival.attend(
                deadline=math.inf,
                deadline_unix_ms=math.inf,
                cancel=CancelSignal(),
                progress=None,
                work=work,
            )
        except JigError as error:
            outcomes["joiner"] = error


async def test_a_join_still_being_checked_when_the_first_is_cancelled_gets_the_result() -> None:
    """The joiner reached the service before the cancel of the first: it is a live waiter
    already, so the first alone is CANCELLED and the work goes on and completes for it."""
    shared, work = SharedOperations(), FakeWork()
    first, checked = CancelSignal(), anyio.Event()
    outcomes: dict[str, RunResult | JigError] = {}
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(_arrive_then_attend, shared, work, outcomes, checked)
        await anyio.wait_all_tasks_blocked()
        first.set()
        tasks.start_soon(_attend, shared, work, first, outcomes, "first")
        await _settled(outcomes, "first")
        left = outcomes["first"]
        assert isinstance(left, JigError) and left.code == Code.CANCELLED and not left.recorded
        assert "continues for its other callers" in left.message
        assert shared.running(KEY) and work.stopped == 0
        checked.set()
        await anyio.wait_all_tasks_blocked()
        work.finish.set()
    assert outcomes["joiner"] == RESULT
    assert (work.started, work.stopped) == (1, 0)


async def test_a_join_refused_by_its_checks_leaves_no_work_behind_for_nobody() -> None:
    """The first left for a joiner still being checked; the joiner never attends: stopped."""
    shared, work = SharedOperations(), FakeWork()
    first, checked = CancelSignal(), anyio.Event()
    outcomes: dict[str, RunResult | JigError] = {}
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(
            partial(_arrive_then_attend, attend=False), shared, work, outcomes, checked
        )
        await anyio.wait_all_tasks_blocked()
        first.set()
        tasks.start_soon(_attend, shared, work, first, outcomes, "first")
        await _settled(outcomes, "first")
        assert work.stopped == 0
        checked.set()
    assert work.stopped == 1 and not shared.running(KEY)


async def test_a_waiter_task_cancelled_as_the_last_stops_the_work() -> None:
    """The coordinator gone (the waiter's task itself cancelled): the work is stopped."""
    shared, work = SharedOperations(), FakeWork()
    outcomes: dict[str, RunResult | JigError] = {}
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(_attend, shared, work, CancelSignal(), outcomes, "first")
        await work.running.wait()
        tasks.cancel_scope.cancel()
    assert work.stopped == 1
    assert "first" not in outcomes


async def test_another_request_under_a_running_operation_id_is_a_conflict() -> None:
    """A different signature under the same key is OPERATION_CONFLICT; the work is untouched."""
    shared, work = SharedOperations(), FakeWork()
    outcomes: dict[str, RunResult | JigError] = {}
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(_attend, shared, work, CancelSignal(), outcomes, "first")
        await work.running.wait()
        await _attend(shared, work, CancelSignal(), outcomes, "other", signature="other")
        work.finish.set()
    conflict = outcomes["other"]
    assert isinstance(conflict, JigError) and conflict.code == Code.OPERATION_CONFLICT
    assert outcomes["first"] == RESULT and work.started == 1


async def test_progress_reaches_every_live_waiter_that_asked_for_it() -> None:
    """The work's progress lines go to the live waiters, not to one that left."""
    shared = SharedOperations()
    seen: list[str] = []

    async def record(
        message: str, elapsed_ms: int | None = None, total_ms: int | None = None
    ) -> None:
        seen.append(message)

    async def work(stop: CancelSignal, progress: Progress | None) -> RunResult:
        assert progress is not None
        await progress("one")
        return RESULT

    async with shared.open():
        result = await shared.attend(
            KEY,
            "sig",
            deadline=math.inf,
            deadline_unix_ms=math.inf,
            cancel=CancelSignal(),
            progress=record,
            work=work,
        )
    assert result == RESULT and seen == ["one"]


async def test_outside_open_a_call_runs_on_its_own_and_its_cancel_stops_it() -> None:
    """Not opened: no sharing; the one caller's cancel is the work's stop."""
    shared, work = SharedOperations(), FakeWork()
    cancel = CancelSignal()
    outcomes: dict[str, RunResult | JigError] = {}
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_attend, shared, work, cancel, outcomes, "only")
        await work.running.wait()
        assert not shared.running(KEY)
        cancel.set()
    only = outcomes["only"]
    assert isinstance(only, JigError) and only.code == Code.CANCELLED and only.recorded


class Elsewhere:
    """The journal's answer to "does a live waiter in another process wait?", as told."""

    def __init__(self, waiting: bool) -> None:
        self.waiting = waiting
        self.asked = 0

    async def __call__(self) -> bool:
        self.asked += 1
        return self.waiting


async def _until_stopped(work: FakeWork) -> None:
    with anyio.fail_after(10):
        await work.stopping.wait()


async def test_a_waiter_elsewhere_keeps_the_work_past_the_last_cancel_here_until_it_goes() -> None:
    """The last waiter here leaves alone while one waits elsewhere; once none does (looked
    at every `OTHERS_POLL_S`), the work stops, as cancelled."""
    shared, work, elsewhere = SharedOperations(), FakeWork(), Elsewhere(True)
    first = CancelSignal()
    outcomes: dict[str, RunResult | JigError] = {}
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(partial(_attend, others=elsewhere), shared, work, first, outcomes, "a")
        await work.running.wait()
        first.set()
        await _settled(outcomes, "a")
        left = outcomes["a"]
        assert isinstance(left, JigError) and left.code == Code.CANCELLED and not left.recorded
        assert "continues for its other callers" in left.message
        assert shared.running(KEY) and work.stopped == 0
        elsewhere.waiting = False
        await _until_stopped(work)
    assert (work.stopped, work.cause) == (1, "cancelled")


async def test_with_nobody_waiting_elsewhere_the_last_cancel_stops_it_and_gets_its_outcome() -> (
    None
):
    """Asked once, as the last waiter here leaves; never on a waiter's way in."""
    shared, work, elsewhere = SharedOperations(), FakeWork(), Elsewhere(False)
    first = CancelSignal()
    outcomes: dict[str, RunResult | JigError] = {}
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(partial(_attend, others=elsewhere), shared, work, first, outcomes, "a")
        await work.running.wait()
        await anyio.wait_all_tasks_blocked()
        assert elsewhere.asked == 0
        first.set()
    last = outcomes["a"]
    assert isinstance(last, JigError) and last.code == Code.CANCELLED and last.recorded
    assert (work.stopped, elsewhere.asked) == (1, 1)


async def test_a_fence_stops_work_kept_for_waiters_elsewhere_and_counts_them_no_more() -> None:
    """The coordinator lost: work kept only for another process stops at once; and a last
    cancel here after the fence stops its work and gets its outcome, whoever waits elsewhere."""
    shared, work, elsewhere = SharedOperations(), FakeWork(), Elsewhere(True)
    first = CancelSignal()
    outcomes: dict[str, RunResult | JigError] = {}
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(partial(_attend, others=elsewhere), shared, work, first, outcomes, "a")
        await work.running.wait()
        first.set()
        await _settled(outcomes, "a")
        assert shared.running(KEY)
        shared.fence()
        await _until_stopped(work)
    assert work.stopped == 1
    again, second = FakeWork(), CancelSignal()
    async with shared.open(), anyio.create_task_group() as tasks:
        tasks.start_soon(partial(_attend, others=elsewhere), shared, again, second, outcomes, "b")
        await again.running.wait()
        second.set()
    last = outcomes["b"]
    assert isinstance(last, JigError) and last.recorded and again.stopped == 1
