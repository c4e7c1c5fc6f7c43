"""Waiting for an envelope slot: first come, first served, until the deadline or a cancel."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import anyio.abc
import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.durable.slotqueue import MAX_WAITING, SlotQueue
from jigcmd.errors import Code, JigError
from jigcmd.journal.reservations import Reservations, Slot

_FAR = 3600.0


def _queue(tmp_path: Path, slots: int = 1) -> tuple[Reservations, SlotQueue]:
    reservations = Reservations(tmp_path, slots)
    return reservations, SlotQueue(reservations.acquire, reservations.exhausted_message)


async def _acquire(
    queue: SlotQueue,
    tag: str,
    got: list[tuple[str, Slot]],
    served: anyio.Event | None = None,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Take a slot as `tag`: started once it waits in line, `served` once it holds the slot."""

    async def queued(_ahead: int) -> None:
        task_status.started()

    slot = await queue.acquire(
        tag, deadline=time.monotonic() + _FAR, cancel=CancelSignal(), queued=queued
    )
    got.append((tag, slot))
    if served is not None:
        served.set()


async def test_a_free_slot_is_taken_at_once_without_being_queued(tmp_path: Path) -> None:
    """Nobody waits and a slot is free: no queue, no notice."""
    _, queue = _queue(tmp_path)
    notices: list[int] = []

    async def queued(ahead: int) -> None:
        notices.append(ahead)

    slot = await queue.acquire(
        "a", deadline=time.monotonic() + _FAR, cancel=CancelSignal(), queued=queued
    )
    slot.release()
    assert notices == []


async def test_waiters_get_slots_in_the_order_they_came(tmp_path: Path) -> None:
    """A then B wait for the one slot; each release serves the first waiter only."""
    reservations, queue = _queue(tmp_path)
    holder = reservations.acquire("holder")
    assert holder is not None
    got: list[tuple[str, Slot]] = []
    a_served = anyio.Event()
    async with anyio.create_task_group() as tasks:
        await tasks.start(_acquire, queue, "a", got, a_served)
        await tasks.start(_acquire, queue, "b", got)
        assert queue.waiting == 2
        holder.release()
        queue.released()
        await a_served.wait()
        assert [tag for tag, _ in got] == ["a"]
        assert queue.waiting == 1
        got[0][1].release()
        queue.released()
    assert [tag for tag, _ in got] == ["a", "b"]
    got[1][1].release()


async def test_a_later_caller_does_not_overtake_a_waiting_one(tmp_path: Path) -> None:
    """While someone waits, a newcomer queues behind it even if a slot just came free."""
    reservations, queue = _queue(tmp_path)
    holder = reservations.acquire("holder")
    assert holder is not None
    got: list[tuple[str, Slot]] = []
    first_served = anyio.Event()
    async with anyio.create_task_group() as tasks:
        await tasks.start(_acquire, queue, "first", got, first_served)
        holder.release()  # freed without waking anyone: the next look finds it
        tasks.start_soon(_acquire, queue, "second", got)
        await first_served.wait()
        assert got[0][0] == "first"
        got[0][1].release()
        queue.released()
    assert [tag for tag, _ in got] == ["first", "second"]
    got[1][1].release()


async def test_a_slot_freed_elsewhere_is_found_by_the_first_waiter(tmp_path: Path) -> None:
    """Another process's release wakes nobody here; the first waiter's next look finds it."""
    reservations, queue = _queue(tmp_path)
    other = Reservations(tmp_path, 1).acquire("another process")
    assert other is not None
    got: list[tuple[str, Slot]] = []
    async with anyio.create_task_group() as tasks:
        await tasks.start(_acquire, queue, "waiter", got)
        other.release()
    assert [tag for tag, _ in got] == ["waiter"]
    assert reservations.holder(0) == "waiter"
    got[0][1].release()


async def test_a_waiter_is_told_once_that_it_is_queued_and_how_many_are_ahead(
    tmp_path: Path,
) -> None:
    """The first waiter hears "0 ahead", the second "1 ahead", each once."""
    reservations, queue = _queue(tmp_path)
    holder = reservations.acquire("holder")
    assert holder is not None
    cancel = CancelSignal()
    notices: list[tuple[str, int]] = []

    async def waiter(
        tag: str, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async def queued(ahead: int) -> None:
            notices.append((tag, ahead))
            task_status.started()

        with pytest.raises(JigError):
            await queue.acquire(tag, deadline=time.monotonic() + _FAR, cancel=cancel, queued=queued)

    async with anyio.create_task_group() as tasks:
        await tasks.start(waiter, "a")
        await tasks.start(waiter, "b")
        cancel.set()
    assert notices == [("a", 0), ("b", 1)]
    holder.release()


async def test_the_wait_ends_at_the_deadline_with_nothing_held(tmp_path: Path) -> None:
    """DEADLINE_EXCEEDED, saying nothing ran; the caller holds no slot and waits no more."""
    reservations, queue = _queue(tmp_path)
    holder = reservations.acquire("holder")
    assert holder is not None
    with pytest.raises(JigError) as failed:
        await queue.acquire("late", deadline=time.monotonic() + 0.05, cancel=CancelSignal())
    assert failed.value.code is Code.DEADLINE_EXCEEDED
    assert "nothing ran" in failed.value.message
    assert queue.waiting == 0
    holder.release()


async def test_a_cancel_ends_the_wait_at_once(tmp_path: Path) -> None:
    """CANCELLED while waiting: nothing ran, nothing held."""
    reservations, queue = _queue(tmp_path)
    holder = reservations.acquire("holder")
    assert holder is not None
    cancel = CancelSignal()
    failures: list[JigError] = []

    async def waiter(
        *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async def queued(_ahead: int) -> None:
            task_status.started()

        try:
            await queue.acquire("w", deadline=time.monotonic() + _FAR, cancel=cancel, queued=queued)
        except JigError as error:
            failures.append(error)

    async with anyio.create_task_group() as tasks:
        await tasks.start(waiter)
        cancel.set()
    assert [f.code for f in failures] == [Code.CANCELLED]
    assert queue.waiting == 0
    holder.release()


async def test_beyond_the_waiting_bound_a_call_is_refused_at_once(tmp_path: Path) -> None:
    """At most MAX_WAITING wait; one more is RESOURCE_EXHAUSTED without waiting."""
    reservations, queue = _queue(tmp_path)
    holder = reservations.acquire("holder")
    assert holder is not None
    cancel = CancelSignal()

    async def waiter(
        *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async def queued(_ahead: int) -> None:
            task_status.started()

        with pytest.raises(JigError):
            await queue.acquire("w", deadline=time.monotonic() + _FAR, cancel=cancel, queued=queued)

    async with anyio.create_task_group() as tasks:
        for _ in range(MAX_WAITING):
            await tasks.start(waiter)
        assert queue.waiting == MAX_WAITING
        with pytest.raises(JigError) as refused:
            await queue.acquire("one more", deadline=time.monotonic() + _FAR, cancel=cancel)
        assert refused.value.code is Code.RESOURCE_EXHAUSTED
        cancel.set()
    holder.release()
