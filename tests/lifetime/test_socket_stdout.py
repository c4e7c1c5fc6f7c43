"""A socketpair as stdout (Node's `child_process`): its peer's close is coordinator loss."""

from __future__ import annotations

import os
import socket
import time
import uuid

import pytest

from tests.lifetime.candidates import LINGER, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope

# A failsafe over the two seconds docs/protocols.md promises (a loaded machine), well under the
# call's ceiling that an unnoticed loss runs to; not a timing claim.
EXIT_WITHIN_S = 6.0
# CPU seconds a serve that is waiting may use in `IDLE_S` of wall time: a loop woken at once,
# forever, by a readable stdout takes all of it.
IDLE_S = 1.0
IDLE_CPU_S = 0.4


def test_the_peer_closing_a_socket_stdout_fences_the_run_in_flight(rig: Rig) -> None:
    """A Node host killed mid-run (its stdin kept open elsewhere): fenced, recorded, exit 0."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve(socket_stdout=True)
    server.send(flow_call("call-1", "op-in-flight", cli_input(LINGER, token)))
    rig.candidate(token)
    assert server.close_output(EXIT_WITHIN_S) == 0
    assert not rig.watch.running(token), "the candidate outlived the server"
    row = rig.row("op-in-flight")
    assert row is not None and (row.state, row.outcome) == ("done", "failure")
    assert row.result is not None and b'"CANCELLED"' in row.result
    assert row.cgroup_job not in set(rig.backend.list_jobs())
    assert "coordinator lost (the reader of stdout went away)" in server.stderr()
    rig.assert_nothing_left()


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time `pid` used so far (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    # utime and stime: fields 14 and 15, counted after the command name's closing paren.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _busy_for(pid: int, seconds: float) -> float:
    before = _cpu_seconds(pid)
    time.sleep(seconds)
    return _cpu_seconds(pid) - before


@pytest.mark.parametrize("peer", ["shut_wr", "stray_bytes"])
def test_a_socket_stdout_still_read_neither_stops_serve_nor_spins(rig: Rig, peer: str) -> None:
    """The peer shuts only its writing side, or writes into our stdout: it may still read.

    serve keeps serving (a ping is answered afterwards) and does not spin on the readable
    socket.
    """
    server = rig.serve(socket_stdout=True)
    rig.prepared(server)
    ours = server.output_socket
    assert ours is not None
    if peer == "shut_wr":
        ours.shutdown(socket.SHUT_WR)
    else:
        ours.send(b"stray\n")
    busy = _busy_for(server.pid, IDLE_S)
    assert busy < IDLE_CPU_S, f"serve used {busy:.2f} s of CPU in {IDLE_S} s waiting"
    server.ping(rig.next_id("still"))
    assert server.close_input() == 0
    rig.assert_nothing_left()
