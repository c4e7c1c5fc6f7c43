"""`fdwait` waits on descriptors past 1023, where `select.select` raises."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import select
from collections.abc import Iterator

import pytest

from jigcmd.fdwait import readable, writable
from tests.required import unavailable

HIGH = 1500


@pytest.fixture
def high_pipe() -> Iterator[tuple[int, int]]:
    """A pipe whose read end is descriptor `HIGH` (the soft limit raised for it if need be)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= HIGH:
        unavailable(f"the descriptor limit ({hard}) is below {HIGH + 1}")
    if soft != resource.RLIM_INFINITY and soft <= HIGH:
        resource.setrlimit(resource.RLIMIT_NOFILE, (HIGH + 1, hard))
    read_end, write_end = os.pipe()
    os.dup2(read_end, HIGH)
    os.close(read_end)
    try:
        yield HIGH, write_end
    finally:
        os.close(HIGH)
        os.close(write_end)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_descriptor_past_1023_is_waited_on(high_pipe: tuple[int, int]) -> None:
    read_end, write_end = high_pipe
    with pytest.raises(ValueError, match="out of range"):
        select.select([read_end], [], [], 0)  # why this module exists
    assert not readable(read_end, 0.01)
    os.write(write_end, b"x")
    assert readable(read_end, 0)
    assert readable(read_end, None)


def test_end_of_file_is_readable_and_a_closed_descriptor_raises() -> None:
    read_end, write_end = os.pipe()
    os.close(write_end)
    assert readable(read_end, 0)
    os.close(read_end)
    with pytest.raises(OSError, match="is not open") as caught:
        readable(read_end, 0)
    assert caught.value.errno == errno.EBADF


def test_a_full_pipe_is_not_writable_until_read() -> None:
    """What a refusing `serve` relies on to stop writing to a peer that never reads."""
    read_end, write_end = os.pipe()
    try:
        assert writable(write_end, 0)
        os.set_blocking(write_end, False)
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(write_end, b"x" * 4096)
        assert not writable(write_end, 0.01)
        os.read(read_end, 1 << 16)
        assert writable(write_end, None)
    finally:
        os.close(read_end)
        os.close(write_end)
