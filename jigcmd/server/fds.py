"""Claiming the protocol descriptors: only the server may ever read stdin or write stdout."""

from __future__ import annotations

import errno
import os
import select
import sys
from typing import NamedTuple

__all__ = ["ProtocolFds", "claim_protocol_fds", "fill_standard_fds"]


class ProtocolFds(NamedTuple):
    """Private, close-on-exec, non-blocking descriptors for the wire."""

    read_fd: int
    write_fd: int

    def input_pollable(self) -> bool:
        """True when readiness of the input can be awaited (pipes, sockets, terminals)."""
        return _pollable(self.read_fd, select.EPOLLIN)

    def output_pollable(self) -> bool:
        """True when readiness of the output can be awaited (pipes, sockets, terminals)."""
        return _pollable(self.write_fd, select.EPOLLOUT)

    def release(self) -> None:
        """Restore blocking mode (the open file may be shared, e.g. a terminal) and close."""
        for fd in (self.read_fd, self.write_fd):
            try:
                os.set_blocking(fd, True)
                os.close(fd)
            except OSError:
                pass


def _pollable(fd: int, events: int) -> bool:
    # Regular files and some devices (/dev/null) cannot be registered with epoll; they never
    # block either, so the server reads and writes them directly.
    poller = select.epoll()
    try:
        poller.register(fd, events)
    except PermissionError:
        return False
    finally:
        poller.close()
    return True


def claim_protocol_fds() -> ProtocolFds:
    """Move the wire to private descriptors; fd 1 becomes stderr and fd 0 becomes /dev/null.

    After this, a stray `print`, a library writing to fd 1, or a child process that inherits
    the standard descriptors can reach neither the protocol input nor the protocol output.
    """
    # Whatever Python buffered for fd 1 so far was meant for the wire's old owner; send it now
    # rather than let it surface later on stderr.
    sys.stdout.flush()
    read_fd = os.dup(0)  # os.dup returns non-inheritable (close-on-exec) descriptors
    write_fd = os.dup(1)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    return ProtocolFds(read_fd, write_fd)


def fill_standard_fds() -> frozenset[int]:
    """Put /dev/null on whichever of fds 0-2 the caller closed (`2>&-`), before anything opens;
    the ones that were closed.

    Otherwise the next file opened (the journal, a key) would take the number, and whatever
    writes "to stderr" would write into it; and Python's `sys.stderr` would be None.
    """
    closed: set[int] = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            continue
        except OSError as exc:
            if exc.errno != errno.EBADF:
                raise
        closed.add(fd)
        # The lowest free number: `fd` itself, as the lower ones are open by now.
        opened = os.open(os.devnull, os.O_RDWR)
        if opened != fd:
            os.dup2(opened, fd)
            os.close(opened)
        stream = open(fd, "w" if fd else "r", errors="backslashreplace", closefd=False)  # noqa: SIM115 - lives as long as the process, as Python's own
        setattr(sys, ("stdin", "stdout", "stderr")[fd], stream)
    return frozenset(closed)
