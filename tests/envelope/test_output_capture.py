"""The executor's output capture: batched while the candidate runs, complete, never a brake."""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
import anyio.lowlevel
import pytest

from jigcmd.envelope import outputs
from jigcmd.envelope.api import OnOutput
from jigcmd.envelope.outputs import Capture, Outputs
from jigcmd.envelope.waker import Waker
from jigcmd.evidence import OUTPUT_CAP_BYTES

# A generous bound on each wait below, so a broken capture fails instead of hanging (not a
# timing claim: every wait ends on something the capture itself does).
_FAILSAFE_S = 10.0


@contextmanager
def _counting_batches(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Each batch read while the candidate runs, as whether it got output."""
    batches: list[bool] = []
    real = outputs.next_batch

    def counted(batch: float, *, got_output: bool) -> float:
        batches.append(got_output)
        return real(batch, got_output=got_output)

    monkeypatch.setattr(outputs, "next_batch", counted)
    yield batches


class _Writer:
    """The candidate's end of the pipe."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.open = True

    def write(self, data: bytes) -> int:
        return os.write(self.fd, data)

    def close(self) -> None:
        if self.open:
            self.open = False
            os.close(self.fd)


@asynccontextmanager
async def _pipe_outputs(
    *, on_output: OnOutput | None = None
) -> AsyncIterator[tuple[Waker, Outputs, Capture, _Writer]]:
    """One pipe's capture (its waker and outputs) and its writer, both closed at the end."""
    read_fd, write_fd = os.pipe()
    writer = _Writer(write_fd)
    waker = Waker(asyncio.get_running_loop())
    capture = Capture(read_fd, on_output, "stdout")
    pipes = Outputs(waker, (capture,))
    try:
        yield waker, pipes, capture, writer
    finally:
        pipes.close()
        writer.close()


class _Seen:
    """The output callback: what the capture read so far, and a wait for more."""

    def __init__(self) -> None:
        self.data = b""
        # How many pieces followed bytes dropped unread.
        self.gaps = 0
        self._more = anyio.Event()

    def __call__(self, _name: str, chunk: bytes, whole: bool) -> None:
        self.data += chunk
        self.gaps += not whole
        self._more.set()

    async def until(self, expected: bytes) -> None:
        """Until the capture has read exactly `expected`."""
        with anyio.fail_after(_FAILSAFE_S):
            while self.data != expected:
                self._more = anyio.Event()
                await self._more.wait()


async def test_while_the_candidate_runs_its_output_waits_for_the_batch_or_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A batch far longer than the test: nothing is read before the end is reported.
    monkeypatch.setattr(outputs, "OUTPUT_BATCH_S", 60.0)
    seen = _Seen()
    async with _pipe_outputs(on_output=seen) as (waker, pipes, capture, writer):
        writer.write(b"first ")
        pipes.start()
        # Many turns of the loop: a reader on the pipe would have read at the first.
        for _ in range(20):
            await anyio.lowlevel.checkpoint()
        assert bytes(capture.data) == b""
        writer.write(b"second")
        await anyio.sleep(0.05)
        assert bytes(capture.data) == b""
        pipes.end()
        # The end reads what the pipe holds at once; after it, reads follow the writes.
        assert bytes(capture.data) == b"first second"
        writer.write(b" third")
        await seen.until(b"first second third")
        writer.close()
        assert await waker.until(pipes.done, _FAILSAFE_S)
    assert capture.result().data == b"first second third"
    assert not capture.result().truncated


async def test_a_batch_reads_what_came_meanwhile_without_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(outputs, "OUTPUT_BATCH_S", 0.01)
    with _counting_batches(monkeypatch) as batches:
        seen = _Seen()
        async with _pipe_outputs(on_output=seen) as (waker, pipes, capture, writer):
            pipes.start()
            writer.write(b"progress")
            await seen.until(b"progress")
            writer.close()
            # The next batch reads the EOF and wakes the waiter; no end was reported.
            assert await waker.until(pipes.done, _FAILSAFE_S)
    assert capture.result().data == b"progress"
    assert True in batches


async def test_past_the_cap_output_is_read_at_once_so_a_chatty_candidate_is_not_held_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(outputs, "OUTPUT_BATCH_S", 0.2)
    total = OUTPUT_CAP_BYTES * 64  # far more than the pipe holds (64 KiB by default)
    written = 0
    with _counting_batches(monkeypatch) as batches:
        async with _pipe_outputs() as (waker, pipes, capture, writer):

            def write_all() -> None:
                nonlocal written
                chunk = b"x" * 4096
                while written < total:
                    written += writer.write(chunk)

            pipes.start()
            # The writer blocks whenever the pipe is full; the end is never reported here.
            with anyio.fail_after(30):
                await anyio.to_thread.run_sync(write_all)
            writer.close()
            assert await waker.until(pipes.done, _FAILSAFE_S)
    # At most a batch or two before the cap is reached; past it, a reader follows the writer
    # (without that rule: a batch per pipeful, ~64 here).
    assert len(batches) <= 3
    result = capture.result()
    assert len(result.data) == OUTPUT_CAP_BYTES
    assert result.truncated
    assert capture.dropped == total - OUTPUT_CAP_BYTES


@pytest.mark.parametrize("told", [False, True], ids=["nobody-told", "progress-told"])
async def test_past_the_cap_output_is_drained_in_the_kernel_not_copied(
    told: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flood costs the host a splice per pipeful, not a copy per 64 KiB, whether or not a
    callback is told the output (a caller asking for progress once made it read everything).

    Besides what is kept, only the stream's end is read: at most 4 KiB a drain, what the
    drain leaves in the pipe (`CapturedStream.tail`); the callback is told that, after a gap.
    """
    seen = _Seen() if told else None
    copied = 0
    tail_reads: list[int] = []
    real_read = os.read

    def counted_read(fd: int, size: int) -> bytes:
        nonlocal copied
        data = real_read(fd, size)
        if size <= outputs.OUTPUT_TAIL_BYTES:
            tail_reads.append(len(data))
        else:
            copied += len(data)
        return data

    monkeypatch.setattr(os, "read", counted_read)
    drains = 0
    real_splice = os.splice

    def counted_splice(src: int, dst: int, count: int, *, flags: int = 0) -> int:
        nonlocal drains
        drains += 1
        return real_splice(src, dst, count, flags=flags)

    monkeypatch.setattr(os, "splice", counted_splice)
    total = OUTPUT_CAP_BYTES * 16
    async with _pipe_outputs(on_output=seen) as (waker, pipes, capture, writer):

        def write_all() -> None:
            written = 0
            while written < total:
                written += writer.write(b"x" * 65_536)

        pipes.start()
        with anyio.fail_after(30):
            await anyio.to_thread.run_sync(write_all)
        writer.close()
        assert await waker.until(pipes.done, _FAILSAFE_S)
    assert capture.dropped == total - OUTPUT_CAP_BYTES
    assert capture.result().truncated
    # What was kept, and at most the one read that crossed the cap; then a tail per drain.
    assert copied <= OUTPUT_CAP_BYTES + 65_536
    assert drains and max(tail_reads) <= outputs.OUTPUT_TAIL_BYTES
    if seen is not None:
        # Told what was read, less the ends a later splice in the same drain made stale.
        assert copied < len(seen.data) <= copied + sum(tail_reads)
        assert seen.gaps
    assert sum(tail_reads) < total // 4


async def test_past_the_cap_a_pipe_in_packet_mode_is_drained_a_pipeful_a_wake_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A candidate's `O_DIRECT` on its end makes each 1-byte write a packet and each read one
    packet: a wake-up still drains all the pipe holds, each byte counted, the tail exact."""
    rounds, packets = 25, 200  # a round: what the pipe holds (its 1 MiB has 256 slots)
    wakeups = 0
    async with _pipe_outputs() as (waker, pipes, capture, writer):
        fcntl.fcntl(writer.fd, fcntl.F_SETPIPE_SZ, outputs.OUTPUT_PIPE_BYTES)
        read = capture.read

        def counted(reads: int) -> bool:
            nonlocal wakeups
            wakeups += capture.full
            got = read(reads)
            waker.wake()
            return got

        monkeypatch.setattr(capture, "read", counted)
        stream = bytes(range(256)) * (OUTPUT_CAP_BYTES // 256)
        writer.write(stream)
        fcntl.fcntl(writer.fd, fcntl.F_SETFL, fcntl.fcntl(writer.fd, fcntl.F_GETFL) | os.O_DIRECT)
        pipes.start()
        assert await waker.until(lambda: capture.full, _FAILSAFE_S)
        wakeups = 0
        for n in range(rounds):
            # Written whole before the loop runs again: what one wake-up finds.
            for i in range(packets):
                stream += bytes([(n + i) % 251])
                assert writer.write(stream[-1:]) == 1

            def drained(want: int = (n + 1) * packets) -> bool:
                return capture.dropped == want

            assert await waker.until(drained, _FAILSAFE_S)
        assert wakeups == rounds  # one packet a wake-up: rounds * packets
        writer.close()
        pipes.end()
        assert await waker.until(pipes.done, _FAILSAFE_S)
    result = capture.result()
    assert capture.dropped == rounds * packets
    assert result.data == stream[:OUTPUT_CAP_BYTES]
    assert result.tail == stream[-outputs.OUTPUT_TAIL_BYTES :]


_END = b"\n 1 pass\n 1 fail\n 1 error\nRan 2 tests across 2 files. [9.00ms]\n"


@pytest.mark.parametrize(
    ("kept", "splices"),
    [(False, True), (True, True), (False, False)],
    ids=["drained", "read-for-progress", "splice-refused"],
)
async def test_past_the_cap_the_streams_last_bytes_are_kept_beside_its_beginning(
    kept: bool, splices: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where a runner's footer is: the last 4 KiB written, however much was drained (and
    read, where the kernel refuses splice), and how much was."""
    if not splices:

        def refused(src: int, dst: int, count: int, *, flags: int = 0) -> int:
            raise OSError(errno.EINVAL, "splice refused")

        monkeypatch.setattr(os, "splice", refused)
    seen = _Seen() if kept else None
    stream = bytes(range(256)) * (OUTPUT_CAP_BYTES // 16) + _END
    async with _pipe_outputs(on_output=seen) as (waker, pipes, capture, writer):

        def write_all() -> None:
            written = 0
            while written < len(stream):
                written += writer.write(stream[written : written + 3000])

        pipes.start()
        with anyio.fail_after(30):
            await anyio.to_thread.run_sync(write_all)
        writer.close()
        assert await waker.until(pipes.done, _FAILSAFE_S)
    result = capture.result()
    assert result.data == stream[:OUTPUT_CAP_BYTES]
    assert result.tail == stream[-outputs.OUTPUT_TAIL_BYTES :]
    assert result.dropped == len(stream) - OUTPUT_CAP_BYTES  # what `jigcmd run` counts


async def test_a_tail_is_kept_only_when_bytes_were_dropped_and_it_is_the_streams_end() -> None:
    """Nothing dropped: no tail (the retained text is the end). A few dropped: the last 4 KiB."""
    stream = b"x" * (OUTPUT_CAP_BYTES - 10) + _END
    for total, tail in ((OUTPUT_CAP_BYTES, b""), (len(stream), stream[-4096:])):
        async with _pipe_outputs() as (waker, pipes, capture, writer):
            fcntl.fcntl(writer.fd, fcntl.F_SETPIPE_SZ, 2 * OUTPUT_CAP_BYTES)
            writer.write(stream[:total])
            writer.close()
            pipes.end()
            assert await waker.until(pipes.done, _FAILSAFE_S)
        assert capture.result().tail == tail


async def test_what_the_output_callback_raises_is_raised_by_the_waiter() -> None:
    def refuse(name: str, chunk: bytes, _whole: bool) -> None:
        raise RuntimeError(f"{name} refused {chunk!r}")

    async with _pipe_outputs(on_output=refuse) as (waker, pipes, _capture, writer):
        pipes.start()
        pipes.end()
        writer.write(b"late")
        with pytest.raises(RuntimeError, match="stdout refused b'late'"):
            await waker.until(pipes.done, _FAILSAFE_S)


async def test_the_time_limit_ends_a_wait_that_nothing_satisfies() -> None:
    async with _pipe_outputs() as (waker, pipes, capture, _writer):
        pipes.end()
        assert not await waker.until(pipes.done, 0.01)
        assert not capture.result().data
        assert capture.result().truncated  # EOF never came


async def test_close_stops_every_reader_and_closes_the_pipe_once() -> None:
    async with _pipe_outputs() as (_waker, pipes, capture, _writer):
        pipes.end()  # a reader follows the pipe
        pipes.close()
        with pytest.raises(OSError, match="Bad file descriptor"):
            os.fstat(capture.fd)
        pipes.close()  # a second close touches no descriptor (it might be another's by now)
        # No reader is left on the loop: a reader of a closed descriptor would fail the loop.
        await anyio.sleep(0.01)
    assert bytes(capture.data) == b""


def test_silence_doubles_the_wait_between_reads_up_to_a_ceiling_and_output_resets_it() -> None:
    first, ceiling = outputs.OUTPUT_BATCH_S, outputs.OUTPUT_BATCH_MAX_S
    waits = [first]
    for _ in range(8):
        waits.append(outputs.next_batch(waits[-1], got_output=False))
    assert waits[:3] == [first, 2 * first, 4 * first]
    assert max(waits) == ceiling
    assert waits[-1] == ceiling
    assert outputs.next_batch(ceiling, got_output=True) == first
    # A wait set longer than the ceiling (tests do) is never shortened by silence.
    assert outputs.next_batch(60.0, got_output=False) == 60.0
