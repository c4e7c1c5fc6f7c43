"""A journal write on the request's path: at once, retried on the loop, waited for in a thread."""

from __future__ import annotations

import threading

import anyio
import anyio.lowlevel
import pytest

from jigcmd.durable import pathwrite


class Attempts:
    """An attempt that finds the journal busy `busy` times, then writes."""

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.calls = 0
        self.threads: set[int] = set()

    def __call__(self) -> str | None:
        self.calls += 1
        self.threads.add(threading.get_ident())
        return None if self.calls <= self.busy else "written"


def _waited_in(threads: set[int]) -> str:
    threads.add(threading.get_ident())
    return "waited"


@pytest.mark.anyio
@pytest.mark.parametrize(("busy", "calls"), [(0, 1), (3, 4)], ids=["uncontended", "contended"])
async def test_a_write_is_made_on_the_loop_at_once_or_after_tries_there(
    busy: int, calls: int
) -> None:
    """Uncontended: one attempt. Contended for a while: tried again on the loop, no thread."""
    attempt = Attempts(busy=busy)
    waiter_threads: set[int] = set()
    assert await pathwrite.write_soon(attempt, lambda: _waited_in(waiter_threads)) == "written"
    assert attempt.calls == calls and attempt.threads == {threading.get_ident()}
    assert not waiter_threads


@pytest.mark.anyio
async def test_a_write_still_contended_after_its_tries_waits_in_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pathwrite, "LOOP_PAUSE_S", 0.0)
    attempt = Attempts(busy=10_000)
    waiter_threads: set[int] = set()
    assert await pathwrite.write_soon(attempt, lambda: _waited_in(waiter_threads)) == "waited"
    assert attempt.calls == 1 + pathwrite.LOOP_TRIES
    assert waiter_threads and threading.get_ident() not in waiter_threads


@pytest.mark.anyio
async def test_a_cancel_during_the_retries_arrives_once_the_write_has_landed() -> None:
    """The caller learns whether it wrote: never cancelled between a try and its answer."""
    attempt = Attempts(busy=3)
    landed: list[str] = []
    with anyio.CancelScope() as scope:

        def cancel_then_try() -> str | None:
            scope.cancel()  # the caller's deadline or cancel, mid-wait
            return attempt()

        landed.append(await pathwrite.write_soon(cancel_then_try, lambda: "waited"))
        await anyio.lowlevel.checkpoint()  # the cancel is delivered here
        landed.append("after")
    assert scope.cancelled_caught
    assert landed == ["written"] and attempt.calls == 4
