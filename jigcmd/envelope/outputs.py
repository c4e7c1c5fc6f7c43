"""The candidate's two output pipes, read from the event loop's callbacks, capped, to EOF.

While the candidate runs, its output is read every 50 ms, not as it comes: each wake-up of
the server costs ~0.25 ms of CPU that Bun needs on the same cores (`bun test` writes five
times). The pipes are enlarged to hold what comes meanwhile; the run's end cuts the wait
short, and past the cap (where output is dropped) reads follow the writes at once, so a
chatty candidate is held back at most a batch or two. Through silence the wait doubles up
to 200 ms, so that a long quiet run costs the server next to nothing. After the end, every
writer is dead or dying: each pipe is followed to its EOF.

Past the cap the output is drained, not read: nothing keeps it, so each wake-up moves all
a pipe holds to `/dev/null` with `splice`, in the kernel, instead of copying it here 64 KiB
a wake-up (a candidate writing 1 MiB chunks to both streams cost the host 1.7 times its own
CPU). Stopping the reads instead would block a chatty candidate until its deadline,
changing how it ends. Only the last 4 KiB a wake-up finds are read, into a ring: the
stream's end, where a runner prints its summary (Bun's footer counts the test files that
failed to load, `jigcmd.protocol.bunconsole`). An `on_output` callback changes none of
this: it is told what is read (the kept output, then those tails, each marked as following
a gap), so a caller asking for progress costs the host what one asking none does.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import sys
import termios

from jigcmd.envelope.api import CapturedStream, OnOutput
from jigcmd.envelope.waker import Waker
from jigcmd.evidence import OUTPUT_CAP_BYTES

__all__ = ["OUTPUT_PIPE_BYTES", "OUTPUT_TAIL_BYTES", "Capture", "Outputs", "next_batch"]

OUTPUT_BATCH_S = 0.05
OUTPUT_BATCH_MAX_S = 0.2
OUTPUT_PIPE_BYTES = 1024 * 1024
_READ_CHUNK = 65_536
# One batch reads at most what an enlarged pipe holds, then lets the loop run.
_BATCH_READS = OUTPUT_PIPE_BYTES // _READ_CHUNK
# Past the cap, the stream's end is kept this long (`CapturedStream.tail`).
OUTPUT_TAIL_BYTES = 4096
# Past the cap, one wake-up drops at most this much, in at most this many reads, so that
# one stream cannot keep the loop from the other and from the run's end.
_DRAIN_BYTES = OUTPUT_PIPE_BYTES
_DRAIN_READS = 4096


def next_batch(batch: float, *, got_output: bool) -> float:
    """The next wait between reads while the candidate runs (see the module's docstring)."""
    return OUTPUT_BATCH_S if got_output else max(batch, min(batch * 2, OUTPUT_BATCH_MAX_S))


class Capture:
    """One output pipe: what was kept (up to the cap), how much was dropped, whether EOF came.

    Past the cap, the last `OUTPUT_TAIL_BYTES` dropped are kept too: the stream's end.
    """

    def __init__(self, fd: int, on_output: OnOutput | None = None, name: str = "") -> None:
        self.fd = fd
        self.name = name
        self.on_output = on_output
        os.set_blocking(fd, False)
        self.data = bytearray()
        self.dropped = 0
        self.eof = False
        # `/dev/null`, opened when the cap is first reached; -1 when splice is refused here.
        self._null: int | None = None
        # The last bytes read past the cap, and whether they follow `data` with none left out
        # between (until a splice drops some unread).
        self._tail = bytearray()
        self._joined = True

    @property
    def full(self) -> bool:
        """Whether the cap is reached: what comes now is dropped (and read at once)."""
        return len(self.data) >= OUTPUT_CAP_BYTES

    def read(self, reads: int) -> bool:
        """Read what the pipe holds now, at most `reads` times; whether anything (or EOF) came."""
        got = False
        for _ in range(reads):
            if self.eof:
                break
            if self.full:
                # One drain a wake-up: past the cap a reader follows the pipe
                # (`Outputs._follow`) and wakes again as soon as more is written.
                return self._drain() or got
            try:
                chunk = os.read(self.fd, _READ_CHUNK)
            except BlockingIOError:
                break
            got = True
            if not chunk:
                self.eof = True
                break
            self._keep(chunk)
        return got

    def _drain(self) -> bool:
        """Drop what the pipe holds until it is empty or at EOF, but read its last bytes into
        the tail; at most `_DRAIN_READS` reads and `_DRAIN_BYTES` a wake-up, then the loop
        runs (and the reader wakes again). Whether anything (or EOF) came.

        A pipe in packet mode (`O_DIRECT` on the writer's end, which the candidate may set)
        gives a read one packet, which may be one byte written, and holds one packet a slot,
        often less than the tail, so nothing is spliced: read a packet a wake-up, such a
        stream cost the host 14 times the CPU per byte. So the reads go on while the pipe
        held something at the last look (`FIONREAD`), looked at again once that much is taken.
        """
        if self._null is None:
            self._null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        start = self.dropped
        known = 0  # what the pipe held at the last look and is not taken yet
        tail = self._tail
        told = _Told(self.name, self.on_output)
        for _ in range(_DRAIN_READS):
            if self.dropped - start >= _DRAIN_BYTES:
                break
            if known <= 0 and self._null != -1:
                known = _held(self.fd)
                spliced = self._splice(self._null, known - OUTPUT_TAIL_BYTES)
                known -= spliced
                if spliced:
                    told.gap()
            # 4 KiB at most, where splice works: what comes on top is dropped unread.
            size = OUTPUT_TAIL_BYTES if self._null != -1 else _READ_CHUNK
            try:
                chunk = os.read(self.fd, size)
            except BlockingIOError:
                break
            if not chunk:
                self.eof = True
                break
            known -= len(chunk)
            self.dropped += len(chunk)
            tail += chunk  # cut to its last bytes below, not at each of many small reads
            if len(tail) > _READ_CHUNK:
                del tail[:-OUTPUT_TAIL_BYTES]
            told.add(chunk)
        told.flush()
        self._keep_tail(b"")
        return self.eof or self.dropped > start

    def _splice(self, null: int, count: int) -> int:
        """Drop `count` bytes of the pipe (none when not positive) to `null` in the kernel;
        how many went. Leaves what follows them to be read into the tail."""
        if count <= 0:
            return 0
        try:
            moved = os.splice(self.fd, null, count, flags=os.SPLICE_F_NONBLOCK)
        except BlockingIOError:
            return 0
        except OSError:
            # Splice refused (a sandbox's kernel): read and drop, as below the cap.
            os.close(null)
            self._null = -1
            return 0
        if moved:
            self._tail.clear()
            self._joined = False
            self.dropped += moved
        return moved

    def close(self) -> None:
        """Close the pipe (and `/dev/null` when it was opened)."""
        os.close(self.fd)
        if self._null is not None and self._null != -1:
            os.close(self._null)
            self._null = -1

    def _keep(self, chunk: bytes) -> None:
        if self.on_output is not None:
            self.on_output(self.name, chunk, True)
        room = OUTPUT_CAP_BYTES - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        if len(chunk) > room:
            self._keep_tail(chunk[max(room, len(chunk) - OUTPUT_TAIL_BYTES, 0) :])
        self.dropped += max(0, len(chunk) - max(room, 0))

    def _keep_tail(self, dropped: bytes) -> None:
        self._tail += dropped
        if len(self._tail) > OUTPUT_TAIL_BYTES:
            del self._tail[:-OUTPUT_TAIL_BYTES]

    def result(self) -> CapturedStream:
        """What was kept; truncated when something was dropped or EOF never came."""
        tail = b""
        if self.dropped:
            end = self.data[-OUTPUT_TAIL_BYTES:] + self._tail if self._joined else self._tail
            tail = bytes(end[-OUTPUT_TAIL_BYTES:])
        return CapturedStream(
            data=bytes(self.data),
            truncated=self.dropped > 0 or not self.eof,
            tail=tail,
            dropped=self.dropped,
        )


class _Told:
    """What one drain read, told to `on_output` a pipeful at a time, not a read at a time
    (a pipe in packet mode gives a read one packet), with the gaps splices left in it."""

    def __init__(self, name: str, on_output: OnOutput | None) -> None:
        self._name = name
        self._on_output = on_output
        self._read = bytearray()
        # Whether bytes were dropped unread since the last piece told.
        self._gap = False

    def gap(self) -> None:
        """Bytes were dropped unread: what was read before them is no longer the stream's end."""
        self._read.clear()
        self._gap = True

    def add(self, chunk: bytes) -> None:
        """`chunk` was read (told once a read pipeful is held, or at the drain's end)."""
        if self._on_output is not None:
            self._read += chunk
            if len(self._read) >= _READ_CHUNK:
                self.flush()

    def flush(self) -> None:
        """Tell what was read and not told yet (or the gap alone)."""
        if self._on_output is not None and (self._read or self._gap):
            self._on_output(self._name, bytes(self._read), not self._gap)
            self._read.clear()
            self._gap = False


def _held(fd: int) -> int:
    """How many bytes a pipe holds now."""
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, bytes(4)), sys.byteorder)


class Outputs:
    """A run's output pipes, read in batches by a timer, then followed by readers to EOF.

    Every callback is guarded by `waker` (what it raises, the waiter raises) and wakes it
    when a pipe reaches EOF. `close` stops them all and closes the pipes.
    """

    def __init__(self, waker: Waker, captures: tuple[Capture, ...]) -> None:
        self.captures = captures
        self._waker = waker
        self._loop = waker.loop
        self._batch = OUTPUT_BATCH_S
        self._timer: asyncio.TimerHandle | None = None
        self._following: list[Capture] = []
        self._ending = False
        self._closed = False
        self._on_batch = waker.guarded(self._batched)
        self._on_readable = waker.guarded(self._readable)

    def start(self) -> None:
        """The candidate may write from now on: read in batches."""
        self._arm()

    def done(self) -> bool:
        """Whether every pipe reached EOF."""
        return all(capture.eof for capture in self.captures)

    def end(self) -> None:
        """The run ended: read what the pipes hold, then follow each to EOF."""
        self._ending = True
        self._disarm()
        for capture in self.captures:
            capture.read(_BATCH_READS)
            self._follow(capture)
        if self.done():
            self._waker.wake()

    def close(self) -> None:
        """Stop every timer and reader and close the pipes (the run's end is collected)."""
        if self._closed:
            return
        self._closed = True
        self._ending = True
        self._disarm()
        for capture in self._following:
            self._loop.remove_reader(capture.fd)
        self._following.clear()
        for capture in self.captures:
            capture.close()

    def _arm(self) -> None:
        if not self._ending and any(not c.eof and c not in self._following for c in self.captures):
            self._timer = self._loop.call_later(self._batch, self._on_batch)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _batched(self) -> None:
        self._timer = None
        got = False
        for capture in self.captures:
            if capture not in self._following:
                got = capture.read(_BATCH_READS) or got
                if capture.full:
                    self._follow(capture)
        self._batch = next_batch(self._batch, got_output=got)
        if self.done():
            self._waker.wake()
        self._arm()

    def _follow(self, capture: Capture) -> None:
        if capture.eof or capture in self._following:
            return
        self._following.append(capture)
        self._loop.add_reader(capture.fd, self._on_readable, capture)

    def _readable(self, capture: Capture) -> None:
        # Past the cap everything the pipe holds is drained at once (one splice when not kept).
        capture.read(_BATCH_READS if capture.full else 1)
        if capture.eof:
            self._following.remove(capture)
            self._loop.remove_reader(capture.fd)
            self._waker.wake()
