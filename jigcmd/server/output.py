"""The protocol's output: frames buffered, written as the peer takes them, its reader's loss.

Every frame answered from one read is written with a single `os.write` when the pipe
accepts it; the writer task finishes partial writes. A peer that stops reading holds the
server's reading of input (`wait_for_room`), never its memory without bound.
"""

from __future__ import annotations

import logging
import os
import select
import stat
from typing import Final

import anyio
import anyio.lowlevel

from jigcmd import trace

__all__ = ["MAX_BACKLOG_BYTES", "Writer"]

logger = logging.getLogger("jigcmd.server")

# Output the peer has not read yet, beyond which no more input is read until it does: a peer
# that never reads costs at most this (plus one answer), never memory without bound.
MAX_BACKLOG_BYTES: Final = 4 << 20


class Writer:
    """Buffers outgoing frames and writes them to the protocol fd, handling partial writes."""

    def __init__(self, fd: int, *, pollable: bool, input_fd: int) -> None:
        self._fd = fd
        self._input_fd = input_fd
        self._pollable = pollable
        self._buffer = bytearray()
        self._wake = anyio.Event()
        self._emptied: anyio.Event | None = None
        self._roomy: anyio.Event | None = None
        self._blocked = False
        self.closed = False
        # Set once nothing more can be delivered (the peer closed its end).
        self.lost = anyio.Event()

    def send(self, data: bytes) -> None:
        if data and not self.closed:
            self._buffer += data

    def flush(self) -> None:
        """Write what the pipe accepts now; the writer task finishes the rest."""
        if self._blocked or not self._buffer:
            return
        self._write_some()
        if self._buffer:
            self._wake.set()

    def _write_some(self) -> bool:
        """Write until done or the pipe is full; False when the pipe is full."""
        while self._buffer and not self.closed:
            try:
                written = os.write(self._fd, self._buffer)
            except BlockingIOError:
                return False
            except OSError as exc:
                # The peer went away (EPIPE); nothing more can be delivered.
                logger.debug("protocol output closed: %s", exc)
                self.closed = True
                self._buffer.clear()
                self.lost.set()
                break
            del self._buffer[:written]
            trace.mark("server: wrote")
            if self._roomy is not None and len(self._buffer) <= MAX_BACKLOG_BYTES:
                self._roomy.set()
        if self.closed and self._roomy is not None:
            self._roomy.set()
        return True

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            while not self._write_some():
                self._blocked = True
                try:
                    if self._pollable:
                        await anyio.wait_writable(self._fd)
                    else:
                        await anyio.lowlevel.checkpoint()
                finally:
                    self._blocked = False
            if self._emptied is not None:
                self._emptied.set()

    @property
    def backlog(self) -> int:
        """Bytes written by the server and not yet taken by the peer."""
        return len(self._buffer)

    async def wait_for_room(self) -> None:
        """Return once the backlog is at most `MAX_BACKLOG_BYTES` (or the peer is gone)."""
        while len(self._buffer) > MAX_BACKLOG_BYTES and not self.closed:
            self._roomy = anyio.Event()
            self.flush()
            self._wake.set()
            await self._roomy.wait()
        self._roomy = None

    async def drain(self) -> None:
        """Wait until everything buffered was written (or the peer is gone)."""
        self.flush()
        while self._buffer and not self.closed:
            self._emptied = anyio.Event()
            self._wake.set()
            await self._emptied.wait()

    async def watch_reader(self) -> None:
        """Report the loss of stdout's reader even while nothing is being written.

        The write end of a pipe never becomes readable; epoll reports it "readable" (with
        EPOLLERR) exactly when the read end has closed. A socket of its own (Node's
        `child_process` gives each stdio one end of a socketpair) becomes readable when the
        peer closes or shuts it, or writes to it: only a hangup is the reader's loss (see
        `_hung_up`). Other outputs (files, terminals, one socket carrying the input too) are
        only found lost by a failed write.
        """
        if not self._pollable:
            return
        mode = os.fstat(self._fd).st_mode
        if stat.S_ISSOCK(mode) and not _same_file(self._fd, self._input_fd):
            await anyio.wait_readable(self._fd)
            if not _hung_up(self._fd):
                # The peer shut only its writing side, or wrote to our output: it may still
                # read. Watching on would wake the loop at once, forever; a write finds out.
                logger.debug("protocol output readable without a hangup; no longer watched")
                return
        elif stat.S_ISFIFO(mode):
            await anyio.wait_readable(self._fd)
        else:
            return
        logger.debug("protocol output closed: its reader went away")
        self.closed = True
        self._buffer.clear()
        self.lost.set()
        if self._roomy is not None:
            self._roomy.set()


def _same_file(one: int, other: int) -> bool:
    """Whether two descriptors are the same open object (one socket carrying both ways)."""
    a, b = os.fstat(one), os.fstat(other)
    return (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev)


def _hung_up(fd: int) -> bool:
    """Whether the peer of socket `fd` has closed it: POLLHUP (or POLLERR) right now.

    Measured on Linux 6.18 for a Unix stream socketpair, at our end: the peer's close (or
    shutdown of both ways) gives POLLIN|POLLHUP|POLLRDHUP; its shutdown(SHUT_WR) only
    POLLIN|POLLRDHUP (it cannot write, it may still read); its shutdown(SHUT_RD) no event at
    all (only a write sees EPIPE); bytes it wrote only POLLIN. The kernel sets POLLHUP once
    both directions are shut, so it alone says the reader is gone.
    """
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return any(events & (select.POLLHUP | select.POLLERR) for _, events in poller.poll(0))
