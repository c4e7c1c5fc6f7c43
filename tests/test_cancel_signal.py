"""A caller's cancel that calls back: once, at the set, never after its watch ended."""

from __future__ import annotations

import anyio
import pytest

from jigcmd.cancel import CancelSignal

pytestmark = pytest.mark.anyio


def test_each_watcher_is_called_once_as_it_is_set() -> None:
    signal = CancelSignal()
    calls: list[str] = []
    signal.watch(lambda: calls.append("a"))
    signal.watch(lambda: calls.append("b"))
    assert not signal.is_set() and calls == []
    signal.set()
    signal.set()
    assert signal.is_set()
    assert calls == ["a", "b"]


def test_a_watch_of_a_set_signal_is_called_at_once() -> None:
    signal = CancelSignal()
    signal.set()
    calls: list[str] = []
    signal.watch(lambda: calls.append("late"))
    assert calls == ["late"]


def test_an_ended_watch_is_not_called() -> None:
    signal = CancelSignal()
    calls: list[str] = []
    unwatch = signal.watch(lambda: calls.append("gone"))
    signal.watch(lambda: calls.append("kept"))
    unwatch()
    unwatch()  # ending it twice is harmless
    signal.set()
    assert calls == ["kept"]


async def test_it_is_waited_for_like_an_event() -> None:
    signal = CancelSignal()
    woken: list[bool] = []

    async def waiter(cancel: CancelSignal) -> None:
        await cancel.wait()
        woken.append(cancel.is_set())

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter, signal)
        await anyio.wait_all_tasks_blocked()
        assert woken == []
        signal.set()
    assert woken == [True]
    with anyio.fail_after(1):
        await signal.wait()  # set: returns at once


def test_its_cause_is_the_first_sets() -> None:
    """A cancel until set otherwise; a stop for the last waiter's deadline says so, and a
    later set changes nothing."""
    signal = CancelSignal()
    unset = (signal.cause, signal.deadline_passed())
    signal.set("deadline")
    signal.set("cancelled")
    assert unset == ("cancelled", False)
    assert (signal.cause, signal.deadline_passed()) == ("deadline", True)
    plain = CancelSignal()
    plain.set()
    assert (plain.cause, plain.deadline_passed()) == ("cancelled", False)
