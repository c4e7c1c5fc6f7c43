"""The executor's output capture: batched while the candidate runs, complete, never a brake."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import cast

import anyio
import pytest

from jigcmd.envelope import native
from jigcmd.evidence import OUTPUT_CAP_BYTES

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _until(condition: Callable[[], bool], what: str) -> None:
    """Yield until `condition()` holds; fail after a generous bound (not a timing claim)."""
    with anyio.move_on_after(10):
        while not condition():
            await anyio.sleep(0.001)
        return
    pytest.fail(f"still waiting for {what} after 10 s")


async def test_while_the_candidate_runs_its_output_waits_for_the_batch_or_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A batch far longer than the test: nothing is read before the end is reported.
    monkeypatch.setattr(native, "_OUTPUT_BATCH_S", 60.0)
    read_fd, write_fd = os.pipe()
    ending = anyio.Event()
    capture = native._Capture(read_fd, ending)
    os.write(write_fd, b"first ")
    async with anyio.create_task_group() as tg:
        tg.start_soon(capture.pump)
        await anyio.sleep(0.05)
        os.write(write_fd, b"second")
        await anyio.sleep(0.05)
        assert bytes(capture.data) == b""
        ending.set()
        await _until(lambda: bytes(capture.data) == b"first second", "the read at the end")
        os.write(write_fd, b" third")
        os.close(write_fd)
        await capture.done.wait()
    # After the end, reads follow the writes until EOF.
    assert capture.result().data == b"first second third"
    assert not capture.result().truncated


async def test_a_batch_reads_what_came_meanwhile_without_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(native, "_OUTPUT_BATCH_S", 0.01)
    read_fd, write_fd = os.pipe()
    capture = native._Capture(read_fd, anyio.Event())
    async with anyio.create_task_group() as tg:
        tg.start_soon(capture.pump)
        os.write(write_fd, b"progress")
        await _until(lambda: bytes(capture.data) == b"progress", "a batch's read")
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
    monkeypatch.setattr(native, "_OUTPUT_BATCH_S", 0.2)
    read_fd, write_fd = os.pipe()
    ending = _CountingEnding()
    capture = native._Capture(read_fd, cast("anyio.Event", ending))
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
    first, ceiling = native._OUTPUT_BATCH_S, native._OUTPUT_BATCH_MAX_S
    waits = [first]
    for _ in range(8):
        waits.append(native._next_batch(waits[-1], got_output=False))
    assert waits[:3] == [first, 2 * first, 4 * first]
    assert max(waits) == ceiling
    assert waits[-1] == ceiling
    assert native._next_batch(ceiling, got_output=True) == first
    # A wait set longer than the ceiling (tests do) is never shortened by silence.
    assert native._next_batch(60.0, got_output=False) == 60.0
