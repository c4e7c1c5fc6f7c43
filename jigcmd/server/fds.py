"""Claiming the protocol descriptors: only the server may ever read stdin or write stdout."""

from __future__ import annotations

import os
import stat
import sys
from typing import NamedTuple

__all__ = ["ProtocolFds", "claim_protocol_fds"]


class ProtocolFds(NamedTuple):
    """Private, close-on-exec, non-blocking descriptors for the wire."""

    read_fd: int
    write_fd: int

    def is_regular_input(self) -> bool:
        """True when the input is a regular file, which readiness polling cannot watch."""
        return stat.S_ISREG(os.fstat(self.read_fd).st_mode)

    def is_regular_output(self) -> bool:
        """True when the output is a regular file, which readiness polling cannot watch."""
        return stat.S_ISREG(os.fstat(self.write_fd).st_mode)

    def release(self) -> None:
        """Restore blocking mode (the open file may be shared, e.g. a terminal) and close."""
        for fd in (self.read_fd, self.write_fd):
            try:
                os.set_blocking(fd, True)
                os.close(fd)
            except OSError:
                pass


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
