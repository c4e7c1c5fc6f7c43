"""The executor's output capture: batched while the candidate runs, complete, never a brake."""

from __future__ import annotations

import os
from typing import cast

import anyio
import pytest

from jigcmd.envelope import collection
from jigcmd.evidence import OUTPUT_CAP_BYTES

# A generous bound on each wait below, so a broken pump fails instead of hanging (not a timing
# claim: every wait ends on an event the pump itself causes).
_FAILSAFE_S = 10.0


class _WatchedEnding:
    """The run's end as the pump sees it: each time the pump looks at it or waits on it, we know.

    The pump looks (`is_set`) before each read and after each read that found nothing, so
    after a look following a write, that write was read if it ever will be before the end.
    """

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.waits = 0
        self._looked = anyio.Event()
        self._waiting = anyio.Event()

    def set(self) -> None:
        self.event.set()

    def is_set(self) -> bool:
        self._looked.set()
        return self.event.is_set()

    async def wait(self) -> None:
        self.waits += 1
        self._waiting.set()
        await self.event.wait()

    async def next_look(self) -> None:
        """Until the pump looks at the end again."""
        self._looked = anyio.Event()
        with anyio.fail_after(_FAILSAFE_S):
            await self._looked.wait()

    async def parked(self) -> None:
        """Until the pump waits for the end (or its batch) for the first time."""
        with anyio.fail_after(_FAILSAFE_S):
            await self._waiting.wait()


async def _until_read(capture: collection.Capture, ending: _WatchedEnding, expected: bytes) -> None:
    """Until the pump holds exactly `expected`: each look of the pump is a chance to have read."""
    while bytes(capture.data) != expected:
        await ending.next_look()


async def test_while_the_candidate_runs_its_output_waits_for_the_batch_or_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A batch far longer than the test: nothing is read before the end is reported.
    monkeypatch.setattr(collection, "_OUTPUT_BATCH_S", 60.0)
    read_fd, write_fd = os.pipe()
    ending = _WatchedEnding()
    capture = collection.Capture(read_fd, cast("anyio.Event", ending))
    os.write(write_fd, b"first ")
    async with anyio.create_task_group() as tg:
        tg.start_soon(capture.pump)
        # Output was waiting when the pump started: it waits for the batch instead of reading.
        await ending.parked()
        assert bytes(capture.data) == b""
        os.write(write_fd, b"second")
        # Every other task blocked: the pump did not wake for the new output, nor read it.
        await anyio.wait_all_tasks_blocked()
        assert bytes(capture.data) == b""
        assert ending.waits == 1
        ending.set()
        await _until_read(capture, ending, b"first second")
        os.write(write_fd, b" third")
        os.close(write_fd)
        await capture.done.wait()
    # After the end, reads follow the writes until EOF.
    assert capture.result().data == b"first second third"
    assert not capture.result().truncated


async def test_a_batch_reads_what_came_meanwhile_without_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(collection, "_OUTPUT_BATCH_S", 0.01)
    read_fd, write_fd = os.pipe()
    ending = _WatchedEnding()
    capture = collection.Capture(read_fd, cast("anyio.Event", ending))
    async with anyio.create_task_group() as tg:
        tg.start_soon(capture.pump)
        os.write(write_fd, b"progress")
        await _until_read(capture, ending, b"progress")
        os.close(write_fd)
        await capture.done.wait()
    assert capture.result().data == b"progress"


class _CountingEnding:
    """The run's end event, counting how often the pump waited for a batch."""

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.waits = 0

    def is_set(self) -> bool:
        return self.event.is_set()

    async def wait(self) -> None:
        self.waits += 1
        await self.event.wait()


async def test_past_the_cap_output_is_read_at_once_so_a_chatty_candidate_is_not_held_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(collection, "_OUTPUT_BATCH_S", 0.2)
    read_fd, write_fd = os.pipe()
    ending = _CountingEnding()
    capture = collection.Capture(read_fd, cast("anyio.Event", ending))
    total = OUTPUT_CAP_BYTES * 64  # far more than the pipe holds (64 KiB by default)
    written = 0

    def write_all() -> None:
        nonlocal written
        chunk = b"x" * 4096
        while written < total:
            written += os.write(write_fd, chunk)

    async with anyio.create_task_group() as tg:
        tg.start_soon(capture.pump)
        # The writer blocks whenever the pipe is full; the end is never reported here.
        with anyio.fail_after(30):
            await anyio.to_thread.run_sync(write_all)
        os.close(write_fd)
        await capture.done.wait()
    # At most a batch or two before the cap is reached; past it, the pump reads as the writer
    # writes (without that rule: a batch per pipeful, ~64 here).
    assert ending.waits <= 3
    result = capture.result()
    assert len(result.data) == OUTPUT_CAP_BYTES
    assert result.truncated
    assert capture.dropped == total - OUTPUT_CAP_BYTES


def test_silence_doubles_the_wait_between_reads_up_to_a_ceiling_and_output_resets_it() -> None:
    first, ceiling = collection._OUTPUT_BATCH_S, collection._OUTPUT_BATCH_MAX_S
    waits = [first]
    for _ in range(8):
        waits.append(collection._next_batch(waits[-1], got_output=False))
    assert waits[:3] == [first, 2 * first, 4 * first]
    assert max(waits) == ceiling
    assert waits[-1] == ceiling
    assert collection._next_batch(ceiling, got_output=True) == first
    # A wait set longer than the ceiling (tests do) is never shortened by silence.
    assert collection._next_batch(60.0, got_output=False) == 60.0
