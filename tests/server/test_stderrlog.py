"""Logging to stderr never blocks: a peer that never drains it costs bounded memory, no stall."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator

import pytest

from jigcmd.server.stderrlog import BURST, MAX_RECORD_CHARS, PER_SECOND, StderrHandler


@pytest.fixture
def undrained() -> Iterator[tuple[int, int]]:
    """A pipe nobody reads until the test does: (read end, write end)."""
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
    yield read_fd, write_fd
    with contextlib.suppress(OSError):
        os.close(read_fd)
    os.close(write_fd)


@pytest.fixture
def handlers(undrained: tuple[int, int]) -> Iterator[list[StderrHandler]]:
    """Handlers on the undrained pipe, each stopped before the pipe's descriptors close."""
    made: list[StderrHandler] = []
    yield made
    read_fd, _ = undrained
    for handler in made:
        handler.close()
    # A writer blocked on the full pipe gets EPIPE now, and ends.
    os.close(read_fd)
    for handler in made:
        assert handler.stopped(30)


def _logger(handler: StderrHandler) -> logging.Logger:
    logger = logging.getLogger(f"jigcmd.test.{id(handler)}")
    logger.propagate = False
    logger.addHandler(handler)
    return logger


def _drain(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return b"".join(chunks)
        chunks.append(chunk)


def test_logging_a_flood_of_huge_records_to_an_undrained_pipe_never_blocks(
    undrained: tuple[int, int], handlers: list[StderrHandler]
) -> None:
    """10,000 records of 200 KB to a full pipe all return; what waits is bounded and counted."""
    read_fd, write_fd = undrained
    handler = StderrHandler(write_fd)
    handlers.append(handler)
    logger = _logger(handler)
    done = threading.Event()

    def flood() -> None:
        for index in range(10_000):
            logger.warning("record %d %s", index, "x" * 200_000)
        done.set()

    threading.Thread(target=flood, daemon=True).start()
    # A blocked emit would never set it; the wait only guards the test against a hang.
    assert done.wait(60), "logging blocked on a pipe nobody reads"
    assert handler.dropped > 0
    data = _drain(read_fd)
    # What the pipe took, plus what is queued, never exceeds the bounds.
    first = data.split(b"\n", 1)[0]
    assert len(first) <= MAX_RECORD_CHARS + 100
    assert b"more characters" in first


def test_records_beyond_the_burst_are_dropped_and_the_drop_is_reported(
    undrained: tuple[int, int], handlers: list[StderrHandler]
) -> None:
    """Past the rate limit records are counted, and the count precedes the next record written."""
    read_fd, write_fd = undrained
    now = [0.0]
    handler = StderrHandler(write_fd, clock=lambda: now[0])
    handlers.append(handler)
    logger = _logger(handler)
    for index in range(BURST + 25):
        logger.warning("burst %d", index)
    assert handler.dropped == 25
    now[0] += 1 / PER_SECOND  # one token refilled
    logger.warning("after")
    handler.flush(5.0)
    lines = _drain(read_fd).decode().splitlines()
    assert lines[:BURST] == [f"burst {i}" for i in range(BURST)]
    assert lines[BURST:] == ["jigcmd: WARNING 25 log records dropped (stderr slow)", "after"]


def test_a_said_line_is_written_as_it_is_even_past_the_rate_limit(
    undrained: tuple[int, int], handlers: list[StderrHandler]
) -> None:
    """`say` (a front's own line: the run id) is not a log record: no prefix, no token taken."""
    read_fd, write_fd = undrained
    handler = StderrHandler(write_fd, clock=lambda: 0.0)
    handlers.append(handler)
    logger = _logger(handler)
    for index in range(BURST):
        logger.warning("burst %d", index)
    handler.say("jigcmd serve: run id run-7")
    handler.flush(5.0)
    lines = _drain(read_fd).decode().splitlines()
    assert lines[BURST:] == ["jigcmd serve: run id run-7"]
