"""A candidate holding descriptors in flight does not break its neighbours' envelopes.

The kernel counts descriptors in flight in SCM_RIGHTS messages per host user and refuses a
send once that count passes the sender's RLIMIT_NOFILE. A candidate (nofile 256) can hold
~506 in flight. Pid 1 of every envelope handed its scratch to the zygote with such a message;
while every envelope ran as host uid 65534, under a server whose nofile was 400, that send
failed while the candidate held them: every neighbour's preparation failed, the zygote
re-prepared in a loop and blocked writing to the server, and the runs in flight (the hostile
one too) ended `UNCERTAIN`. Driven here as a caller does: the official MCP SDK against a
real `jigcmd serve` whose own RLIMIT_NOFILE is set to 400 before it starts (never the test's).
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult

from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope

# The server's descriptor limit: below what a candidate can hold in flight.
_SERVER_NOFILE = 400

# Puts copies of its stdin in flight on socketpairs of its own (sent, never received) until
# the kernel refuses, says how many, then holds them until its deadline stops it.
_HOSTILE = r"""
import { dlopen, FFIType, ptr, read } from "bun:ffi";
const L = dlopen("libc.so.6", {
  socketpair: { args: [FFIType.i32, FFIType.i32, FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
  sendmsg: { args: [FFIType.i32, FFIType.ptr, FFIType.i32], returns: FFIType.i64 },
  __errno_location: { args: [], returns: FFIType.ptr },
});
const errno = () => read.i32(L.symbols.__errno_location()!, 0);
const keep: unknown[] = [];
function sendCopies(sock: number, n: number): number {
  const data = Buffer.from("x");
  const iov = Buffer.alloc(16);
  iov.writeBigUInt64LE(BigInt(ptr(data)), 0); iov.writeBigUInt64LE(1n, 8);
  const length = 16 + 4 * n;
  const control = Buffer.alloc((length + 7) & ~7);
  control.writeBigUInt64LE(BigInt(length), 0);
  control.writeInt32LE(1, 8); control.writeInt32LE(1, 12); // SOL_SOCKET, SCM_RIGHTS; fds 0
  const msg = Buffer.alloc(56);
  msg.writeBigUInt64LE(BigInt(ptr(iov)), 16); msg.writeBigUInt64LE(1n, 24);
  msg.writeBigUInt64LE(BigInt(ptr(control)), 32); msg.writeBigUInt64LE(BigInt(control.length), 40);
  keep.push(data, iov, control, msg);
  return Number(L.symbols.sendmsg(sock, msg, 0x40)) < 0 ? errno() : 0; // MSG_DONTWAIT
}
let held = 0, refused = 0;
pairs: for (let k = 0; k < 20; k++) {
  const fds = new Int32Array(2);
  if (L.symbols.socketpair(1, 1, 0, fds) !== 0) break;
  keep.push(fds);
  for (let i = 0; i < 50; i++) {
    const e = sendCopies(fds[0], 253);
    if (e === 11) break; // this pair's buffer is full: the next pair
    if (e !== 0) { refused = e; break pairs; }
    held += 253;
  }
}
console.log(`holding ${held} descriptors in flight, then errno ${refused}`);
await Bun.sleep(60000);
"""
_HELLO = 'console.log("hello " + process.argv[2]);\n'
_NEIGHBOURS = 3


def _params(binding: Path, state: Path) -> StdioServerParameters:
    """`jigcmd serve` started with RLIMIT_NOFILE 400, set in the child before it execs."""
    lowered = (
        "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({_SERVER_NOFILE}, {_SERVER_NOFILE})); "
        "os.execv(sys.executable, [sys.executable, '-m', 'jigcmd', *sys.argv[1:]])"
    )
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-c",
            lowered,
            "serve",
            "--binding",
            str(binding),
            "--state-dir",
            str(state),
            "--max-envelopes",
            str(_NEIGHBOURS + 2),
        ],
    )


def _files(source: str) -> dict[str, str]:
    return {"src/cli.ts": source}


async def test_neighbours_run_and_the_zygote_supervises_while_a_candidate_holds_fds_in_flight(
    tmp_path: Path,
) -> None:
    """Neighbours started while the hostile run holds ~506 fds in flight all run; its answer
    is its own deadline, with evidence; a call after it runs too."""
    binding = admit_example(tmp_path)
    results: dict[str, CallToolResult] = {}
    holding = anyio.Event()
    said: list[str] = []
    with tempfile.TemporaryFile(mode="w+") as errlog:
        async with (
            stdio_client(_params(binding, tmp_path / "state"), errlog=errlog) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                if message and "in flight" in message:
                    said.append(message)
                    holding.set()

            async def hostile() -> None:
                results["hostile"] = await client.call_tool(
                    "cli", {"files": _files(_HOSTILE), "args": []}, progress_callback=on_progress
                )
                holding.set()

            async def neighbour(name: str) -> None:
                results[name] = await client.call_tool(
                    "cli", {"files": _files(_HELLO), "args": [name]}
                )

            async with anyio.create_task_group() as calls:
                calls.start_soon(hostile)
                with anyio.fail_after(120):
                    await holding.wait()
                assert "hostile" not in results, results.get("hostile")
                for index in range(_NEIGHBOURS):
                    calls.start_soon(neighbour, f"n{index}")
            await neighbour("after")
        errlog.seek(0)
        assert "Traceback" not in errlog.read()

    # The precondition: the hostile run held more descriptors in flight than the server may.
    counted = re.search(r"holding (\d+) descriptors in flight", said[0])
    assert counted is not None, said
    assert int(counted.group(1)) > _SERVER_NOFILE, said
    for name in [f"n{index}" for index in range(_NEIGHBOURS)] + ["after"]:
        result = results[name]
        assert result.is_error is False, (name, result.content)
        assert result.structured_content is not None
        assert result.structured_content["stdout"]["head"] == f"hello {name}\n"
    # The hostile run's own end was seen: its deadline, with evidence, never UNCERTAIN.
    answer = results["hostile"]
    assert answer.structured_content is not None, answer.content
    assert answer.structured_content["stopReason"] == "deadline", answer.structured_content
    assert answer.structured_content["cleanup"] == "complete"
