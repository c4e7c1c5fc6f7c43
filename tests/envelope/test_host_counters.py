"""Counters the kernel shares with the host: what a candidate may charge to them, for real.

A candidate's sockets, inotify instances and message queues are charged to counters that do
not stop at its cgroup or its user namespace unless the envelope bounds them: v1's TCP
memory (the host's global `tcp_mem` otherwise), and the per-user counts the kernel charges up
the user-namespace chain to the namespace's creator (host root). Each test holds the counter
past the bound the envelope sets and checks the candidate is stopped (or charged) there.
"""

from __future__ import annotations

import json

import pytest

from jigcmd.plan import Limits
from tests.envelope.hostile_harness import TracedExecutor, probe_plan

pytestmark = pytest.mark.envelope

MIB = 2**20

# Connect to a listener that never accepts, fill the send buffer without blocking, close: the
# orphaned socket keeps its queued data and holds no descriptor. Stops at argv[2] MiB, or when
# 64 connections in a row queue less than 64 KiB each (the kernel refuses more).
ORPHANED_SOCKETS = r"""
import { dlopen, FFIType } from "bun:ffi";
const L = dlopen("libc.so.6", {
  socket: { args: [FFIType.i32, FFIType.i32, FFIType.i32], returns: FFIType.i32 },
  bind: { args: [FFIType.i32, FFIType.ptr, FFIType.u32], returns: FFIType.i32 },
  listen: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
  connect: { args: [FFIType.i32, FFIType.ptr, FFIType.u32], returns: FFIType.i32 },
  getsockname: { args: [FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  send: { args: [FFIType.i32, FFIType.ptr, FFIType.u64, FFIType.i32], returns: FFIType.i64 },
  close: { args: [FFIType.i32], returns: FFIType.i32 },
});
const cap = Number(process.argv[2]) * 2 ** 20;
const buf = Buffer.alloc(1 << 20, 0x41);
const addr = Buffer.alloc(16); addr.writeUInt16LE(2, 0); addr.writeUInt32BE(0x7f000001, 4);
const lfd = L.symbols.socket(2, 1, 0);
L.symbols.bind(lfd, addr, 16); L.symbols.listen(lfd, 4096);
const len = Buffer.alloc(4); len.writeUInt32LE(16); L.symbols.getsockname(lfd, addr, len);
let conns = 0, bytes = 0, lean = 0;
while (bytes < cap && lean < 64) {
  const c = L.symbols.socket(2, 1, 0); if (c < 0) break;
  if (L.symbols.connect(c, addr, 16) !== 0) { L.symbols.close(c); break; }
  let queued = 0;
  for (let n = 1; n > 0; queued += Math.max(n, 0)) {
    n = Number(L.symbols.send(c, buf, buf.length, 0x40)); // MSG_DONTWAIT
  }
  L.symbols.close(c); conns++; bytes += queued;
  lean = queued < 65536 ? lean + 1 : 0;
}
console.log(JSON.stringify({ conns, bytes }));
"""


async def test_orphaned_loopback_sockets_are_charged_to_the_job(envelope: TracedExecutor) -> None:
    """96 MiB queued on sockets without descriptors shows in the peak, not 5 MiB of it (v1 too)."""
    plan = probe_plan(ORPHANED_SOCKETS, args=["96"], seconds=20)
    plan = plan._replace(limits=Limits(memory_bytes=32 * MIB))
    outcome = await envelope.run(plan, None, None)
    assert outcome.stop_reason == "exited", outcome
    queued = json.loads(outcome.stdout.data)["bytes"]
    assert queued >= 64 * MIB
    # Part of it sits in the receive queues of connections never accepted, which the kernel
    # charges to nobody until the accept (measured: about a third): at least half is charged.
    assert outcome.report.peak_memory_bytes is not None
    assert outcome.report.peak_memory_bytes >= queued // 2
