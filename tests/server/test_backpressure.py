"""A peer that never reads its answers: the server stops reading input, its memory stays bounded.

The fake server (the real stdio shell over a canned backend) gets pings as fast as a thread can
write them, and nobody reads its stdout. Past a bounded output backlog it must stop reading,
so the writer ends up blocked on a full input pipe, and the server's memory stays small.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from jigcmd.server.output import MAX_BACKLOG_BYTES
from tests.server.wire_process import FAKE_SERVER, server_env

pytestmark = pytest.mark.slow

_PINGS_BYTES = 48 << 20
# The failsafe: how long the test waits for the server to settle at all (never asserted).
_FAILSAFE_S = 60.0
# How long the writer must make no progress to count as "the server stopped reading".
_STILL_S = 1.0


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_peer_that_never_reads_makes_the_server_stop_reading_with_bounded_memory() -> None:
    """Unread answers: the input is left unread past the backlog bound; RSS stays bounded."""
    input_r, input_w = os.pipe()
    output_r, output_w = os.pipe()
    server = subprocess.Popen(
        [sys.executable, str(FAKE_SERVER), "mcp"],
        stdin=input_r,
        stdout=output_w,
        stderr=subprocess.DEVNULL,
        env=server_env(),
    )
    os.close(output_w)
    written = [0]
    finished = threading.Event()

    def write_pings() -> None:
        ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
        block = ping * (65536 // len(ping))
        try:
            while written[0] < _PINGS_BYTES:
                os.write(input_w, block)
                written[0] += len(block)
        except OSError:
            return
        finished.set()

    try:
        deadline = time.monotonic() + _FAILSAFE_S
        # Started and answering: the baseline is the ready server's memory.
        os.write(input_w, b'{"jsonrpc":"2.0","id":0,"method":"ping"}\n')
        assert os.read(output_r, 4096).startswith(b'{"jsonrpc":"2.0","id":0')
        baseline = _rss_bytes(server.pid)
        writer = threading.Thread(target=write_pings, daemon=True)
        writer.start()
        # Settled: the writer made no progress for a while (the server stopped reading).
        progress, since = -1, time.monotonic()
        while not finished.is_set() and time.monotonic() < deadline:
            if written[0] != progress:
                progress, since = written[0], time.monotonic()
            elif time.monotonic() - since >= _STILL_S:
                break
            finished.wait(0.05)
        assert not finished.is_set(), f"the server read all {written[0]:,} bytes nobody answered"
        assert written[0] < 4 * MAX_BACKLOG_BYTES, written[0]
        grown = _rss_bytes(server.pid) - baseline
        assert grown < 6 * MAX_BACKLOG_BYTES, f"RSS grew by {grown:,} bytes"
        assert server.poll() is None
    finally:
        server.kill()
        server.wait()
        for fd in (input_r, input_w, output_r):
            os.close(fd)
