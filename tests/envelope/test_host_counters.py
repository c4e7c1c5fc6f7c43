"""Counters the kernel shares with the host: what a candidate may charge to them, for real.

A candidate's sockets, inotify instances and message queues are charged to counters that do
not stop at its cgroup or its user namespace unless the envelope bounds them: v1's TCP
memory (the host's global `tcp_mem` otherwise), and the per-user counts the kernel charges up
the user-namespace chain to the namespace's creator (host root). Each test holds the counter
past the bound the envelope sets and checks the candidate is stopped (or charged) there.
"""

from __future__ import annotations

import ctypes
import json
import os

import pytest

from jigcmd.plan import Limits
from tests.envelope.hostile_harness import TracedExecutor, probe_plan

pytestmark = pytest.mark.envelope

MIB = 2**20
IN_CLOEXEC = 0o2000000
_LIBC = ctypes.CDLL(None, use_errno=True)

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


# Makes inotify instances until refused (or argv[2] of them), says how many, then holds them
# for argv[3] ms; with "watches", also adds watches on files of the scratch until refused.
INOTIFY = r"""
import { dlopen, FFIType, read } from "bun:ffi";
import { writeFileSync } from "node:fs";
const L = dlopen("libc.so.6", {
  inotify_init1: { args: [FFIType.i32], returns: FFIType.i32 },
  inotify_add_watch: { args: [FFIType.i32, FFIType.cstring, FFIType.u32], returns: FFIType.i32 },
  __errno_location: { args: [], returns: FFIType.ptr },
});
const errno = () => read.i32(L.symbols.__errno_location()!, 0);
const fds: number[] = [];
let refused = 0;
while (fds.length < Number(process.argv[2])) {
  const fd = L.symbols.inotify_init1(0);
  if (fd < 0) { refused = errno(); break; }
  fds.push(fd);
}
let watches = 0, watchRefused = 0;
if (process.argv[4] === "watches") {
  for (let i = 0; i < 1500; i++) {
    writeFileSync(`/tmp/f${i}`, "");
    if (L.symbols.inotify_add_watch(fds[0], Buffer.from(`/tmp/f${i}\0`), 0x100) < 0) {
      watchRefused = errno(); break;
    }
    watches++;
  }
}
console.log(JSON.stringify({ instances: fds.length, refused, watches, watchRefused }));
await Bun.sleep(Number(process.argv[3]));
"""


async def test_a_candidate_holds_at_most_8_inotify_instances_and_host_root_still_gets_one(
    envelope: TracedExecutor,
) -> None:
    """Asking for 200 inotify instances gets 8 (EMFILE after), and host root makes one meanwhile."""
    host_tries: list[int] = []

    def host_root_tries(stream: str, chunk: bytes, _whole: bool) -> None:
        # The candidate has said how many it holds and holds them for 1.5 s more.
        if stream == "stdout" and b"instances" in chunk and not host_tries:
            fd = _LIBC.inotify_init1(IN_CLOEXEC)
            host_tries.append(fd if fd < 0 else 0)
            if fd >= 0:
                os.close(fd)
            else:
                host_tries.append(ctypes.get_errno())

    plan = probe_plan(INOTIFY, args=["200", "1500"], seconds=10)
    outcome = await envelope.run(plan, None, None, on_output=host_root_tries)
    assert outcome.stop_reason == "exited", outcome
    held = json.loads(outcome.stdout.data)
    assert (held["instances"], held["refused"]) == (8, 24)  # EMFILE
    assert host_tries == [0]


async def test_a_candidate_holds_at_most_1024_inotify_watches(envelope: TracedExecutor) -> None:
    """Watching 1500 files gets 1024 watches, then ENOSPC."""
    plan = probe_plan(INOTIFY, args=["1", "0", "watches"], seconds=10)
    outcome = await envelope.run(plan, None, None)
    assert outcome.stop_reason == "exited", outcome
    held = json.loads(outcome.stdout.data)
    assert (held["watches"], held["watchRefused"]) == (1024, 28)  # ENOSPC


# POSIX message queues (10 messages of 8 KiB each) made until refused (or 32), then the main
# thread blocks SIGRTMIN and queues it to itself (rt_tgsigqueueinfo) until refused (or 4096).
QUEUES_AND_SIGNALS = r"""
import { sys } from "./probe.ts";
const attr = new BigInt64Array([0n, 10n, 8192n, 0n, 0n, 0n, 0n, 0n]);
let queues = 0, queueRefused = null;
for (; queues < 32; queues++) {
  const r = sys(240, Buffer.from(`q${queues}\0`), 0o102, 0o600, Buffer.from(attr.buffer));
  if (r.code !== null) { queueRefused = r.code; break; }
}
sys(14, 0, Buffer.from(new BigUint64Array([1n << 33n]).buffer), 0, 8);
const info = Buffer.alloc(128);
info.writeInt32LE(34, 0); info.writeInt32LE(-1, 8); info.writeInt32LE(process.pid, 16);
let signals = 0, signalRefused = null;
for (; signals < 4096; signals++) {
  const r = sys(297, process.pid, process.pid, 34, info);
  if (r.code !== null) { signalRefused = r.code; break; }
}
console.log(JSON.stringify({ queues, queueRefused, signals, signalRefused }));
await Bun.sleep(Number(process.argv[2]));
"""


async def test_a_candidate_makes_no_message_queue_and_queues_at_most_256_signals(
    envelope: TracedExecutor,
) -> None:
    """mq_open is refused at once (EMFILE), a 257th queued signal with EAGAIN; host root's
    own mq_open works meanwhile."""
    host_tries: list[int] = []
    name = b"jigcmd-test-%d" % os.getpid()  # the system call takes no leading slash

    def host_root_tries(stream: str, chunk: bytes, _whole: bool) -> None:
        if stream == "stdout" and b"queues" in chunk and not host_tries:
            attr = (ctypes.c_long * 8)(0, 10, 8192, 0)
            fd = _LIBC.syscall(240, name, os.O_CREAT | os.O_RDWR, 0o600, attr)  # mq_open
            host_tries.append(ctypes.get_errno() if fd < 0 else 0)
            if fd >= 0:
                os.close(fd)
                _LIBC.syscall(241, name)  # mq_unlink

    plan = probe_plan(QUEUES_AND_SIGNALS, args=["1500"], seconds=10)
    outcome = await envelope.run(plan, None, None, on_output=host_root_tries)
    assert outcome.stop_reason == "exited", outcome
    held = json.loads(outcome.stdout.data)
    assert (held["queues"], held["queueRefused"]) == (0, "EMFILE")
    assert (held["signals"], held["signalRefused"]) == (256, "EAGAIN")
    assert host_tries == [0]
