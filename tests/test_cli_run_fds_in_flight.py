"""Two `jigcmd run`s at once: one candidate's descriptors in flight cost the other nothing.

The kernel counts descriptors in flight in `SCM_RIGHTS` messages per host user and refuses a
send past the sender's `RLIMIT_NOFILE` (ETOOMANYREFS). When every envelope ran as host uid
65534, a candidate holding ~500 of them made every other envelope's `sendmsg(SCM_RIGHTS)`,
and every host `nobody` process's, fail while it held them. Each envelope now runs as a host
uid of its own (`jigcmd/envelope/hostids.py`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.required import unavailable
from tests.test_cli_run import BINDING, evidence, lock

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py

# The name the holder takes once its descriptors are in flight (seen in the host's /proc).
_HELD = "jigcmd-r31e2-hd"

_FFI = r"""
import { dlopen, FFIType, ptr, toArrayBuffer } from "bun:ffi";
const L = dlopen("libc.so.6", {
  socketpair: { args: [FFIType.i32, FFIType.i32, FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
  sendmsg: { args: [FFIType.i32, FFIType.ptr, FFIType.i32], returns: FFIType.i64 },
  prctl: {
    args: [FFIType.i32, FFIType.ptr, FFIType.u64, FFIType.u64, FFIType.u64], returns: FFIType.i32,
  },
  __errno_location: { args: [], returns: FFIType.ptr },
});
const keep: unknown[] = [];
export function errno(): number {
  return new Int32Array(toArrayBuffer(L.symbols.__errno_location(), 0, 4))[0];
}
export function pair(): number {
  const fds = new Int32Array(2); keep.push(fds);
  if (L.symbols.socketpair(1, 1, 0, fds) !== 0) throw new Error("socketpair " + errno());
  return fds[0];
}
// Sends `n` copies of descriptor 0 on `sock` without blocking: [result, errno].
export function send(sock: number, n: number): [number, number] {
  const data = Buffer.from("x");
  const iov = Buffer.alloc(16);
  iov.writeBigUInt64LE(BigInt(ptr(data)), 0); iov.writeBigUInt64LE(1n, 8);
  const clen = 16 + 4 * n;
  const ctl = Buffer.alloc((clen + 7) & ~7);
  ctl.writeBigUInt64LE(BigInt(clen), 0); ctl.writeInt32LE(1, 8); ctl.writeInt32LE(1, 12);
  const msg = Buffer.alloc(56);
  msg.writeBigUInt64LE(BigInt(ptr(iov)), 16); msg.writeBigUInt64LE(1n, 24);
  msg.writeBigUInt64LE(BigInt(ptr(ctl)), 32); msg.writeBigUInt64LE(BigInt(ctl.length), 40);
  keep.push(data, iov, ctl, msg);
  const r = Number(L.symbols.sendmsg(sock, msg, 0x40));
  return [r, r < 0 ? errno() : 0];
}
export function rename(name: string) { L.symbols.prctl(15, Buffer.from(name + "\0"), 0, 0, 0); }
"""

# Puts copies of fd 0 in flight (sent, never received) until the kernel refuses one with
# ETOOMANYREFS, takes the name `_HELD`, and holds them until SIGTERM (or 8 s).
_HOLDER = rf"""
import {{ pair, send, rename }} from "./ffi.ts";
let total = 0, last: [number, number] = [0, 0];
outer: for (let k = 0; k < 20; k++) {{
  const sock = pair();
  for (let i = 0; i < 50; i++) {{
    last = send(sock, 253);
    if (last[0] < 0) {{ if (last[1] === 11) break; else break outer; }}
    total += 253;
  }}
}}
console.log("in flight", total, "then errno", last[1]);
process.on("SIGTERM", () => process.exit(0));
rename("{_HELD}");
await Bun.sleep(8000);
"""

# Sends one descriptor, as any program passing descriptors does.
_SENDER = r"""
import { pair, send } from "./ffi.ts";
const [r, e] = send(pair(), 1);
console.log("sendmsg", r, "errno", e);
"""


def _candidate(where: Path, cli: str) -> Path:
    (where / "src").mkdir(parents=True)
    (where / "src" / "ffi.ts").write_text(_FFI)
    (where / "src" / "cli.ts").write_text(cli)
    return where


def _run(lock: Path, state: Path, files: Path) -> list[str]:
    return [sys.executable, "-m", "jigcmd", "run", "--binding", str(BINDING),
            "--lock", str(lock), "--state-dir", str(state),
            "cli", "--files", str(files), "--json"]  # fmt: skip


def _holders() -> list[int]:
    """The host pids of candidates that took the name `_HELD`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == _HELD:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _host_nobody_sends() -> int:
    """errno of one descriptor sent by a host process of uid 65534 (nofile 256); 0: sent."""
    child = subprocess.run(
        [sys.executable, "-c", (
            "import os, resource, socket\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))\n"
            "os.setgid(65534); os.setuid(65534)\n"
            "a, b = socket.socketpair()\n"
            "try:\n    socket.send_fds(a, [b'x'], [0]); print(0)\n"
            "except OSError as e:\n    print(e.errno)\n"
        )],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return int(child.stdout)


def test_a_candidate_holding_descriptors_in_flight_leaves_the_other_runs_passing_theirs(
    lock: Path, tmp_path: Path
) -> None:
    """Run A holds ~500 descriptors in flight; run B (another state directory) and a host
    `nobody` process each still pass one."""
    if os.geteuid() != 0:
        unavailable("needs root: rootless, every envelope is the server's own user")
    holder = subprocess.Popen(
        _run(lock, tmp_path / "state-a", _candidate(tmp_path / "a", _HOLDER)),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not (held := _holders()) and holder.poll() is None:
            assert time.monotonic() < deadline, "the holder never held its descriptors"
            time.sleep(0.05)
        assert held, holder.communicate()
        sender = subprocess.run(
            _run(lock, tmp_path / "state-b", _candidate(tmp_path / "b", _SENDER)),
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip
        nobody = _host_nobody_sends()
        still_held = _holders() == held
        for pid in held:
            os.kill(pid, signal.SIGTERM)
        out, err = holder.communicate(timeout=60)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    assert still_held, "the holder let go before the others sent"
    ran = evidence(subprocess.CompletedProcess(holder.args, holder.returncode, out, err))
    words = ran.stdout.text.split()
    count, refused = words[2], words[5]
    assert int(count) > 256 and refused == "109", ran.stdout.text  # ETOOMANYREFS: all it could
    assert sender.returncode == 0, sender.stdout + sender.stderr
    assert evidence(sender).stdout.text.split() == ["sendmsg", "1", "errno", "0"]
    assert nobody == 0
