"""The anyio shell's own floor: a model server of jigcmd's shape, its CPU a call beside jigcmd's.

The CPU target of issue #26 (at most 1.1 times the C envelope's, `bench_floor.py`) leaves the
coordinator (the server and the zygote) the difference between 1.1 times the C rung and what
the envelope itself costs (`bench_census.py` splits both). How much of the server's part
is the shape alone, before any of jigcmd's own work? The model server here does only what
the process shape makes every call do, with the same libraries jigcmd's server uses
(anyio on asyncio, msgspec):

  read a request line from stdin (`wait_readable`, as `server/stdio.py`), decode it, start
  the call's task; make the run's pipes (stdout, stderr, the gate) and its socket, hand
  them to a peer process over a control socket (`SCM_RIGHTS`, as the launch to the zygote),
  open the gate; read both pipes to their end (a task each) while reading the peer's three
  reports (started, ended, finished) from the run socket; encode the answer and write it.

The peer (the zygote's stand-in, a blocking loop) writes a line on each pipe and the three
reports, nothing else. No journal, no statement, no validation, plan, placement or
evidence: what is left is the floor any server of this shape on this stack pays a call.

`model+` adds, inline, what every jigcmd call must also do, each the way jigcmd does it:
the request's SHA-256; the journal's three transactions (`BEGIN IMMEDIATE`, a row of
jigcmd's shape begun before the gate opens, the evidence at the run's end, the close; WAL,
`synchronous = NORMAL`, the WAL fdatasynced after the first two, as `journal/database.py`);
and two signed bundles (an in-toto statement of ~30 fields encoded, its DSSE pre-auth
encoding, two Ed25519 signatures each, base64), before the answer.
Blocks of `--calls` calls of the model server and of `jigcmd serve` (the bundled example's
`bun test`, as `bench_floor.py` calls it) alternate `--rounds` times; each server's CPU is
the sum of its threads' `schedstat` run time over the block, per call.

Run as root (jigcmd serve needs it): python scripts/bench_shell_floor.py [--calls 200]
[--rounds 3] [--idle-ms 0]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import secrets
import socket
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout: the sibling benchmark (and the package) must be importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402 - needs the path set up above
import msgspec  # noqa: E402 - likewise
from cryptography.hazmat.primitives.asymmetric.ed25519 import (  # noqa: E402 - likewise
    Ed25519PrivateKey,
)

from scripts.bench_envelope import Serve, admit  # noqa: E402 - likewise

_FRAME = struct.Struct(">I")
_REPORTS = (b"started", b"ended", b"finished")
_OUTPUT = b"(pass) the example > passes [0.12ms]\n"


# -- the model server and its peer -------------------------------------------------------


def _send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_FRAME.pack(len(payload)) + payload)


async def _pump(fd: int, into: list[bytes]) -> None:
    """Read `fd` to its end, waiting for it the way `collection.Capture` does."""
    try:
        while True:
            try:
                chunk = os.read(fd, 65_536)
            except BlockingIOError:
                await anyio.wait_readable(fd)
                continue
            if not chunk:
                return
            into.append(chunk)
    finally:
        os.close(fd)


async def _reports(sock: socket.socket) -> list[bytes]:
    """The peer's three reports from the run socket, framed as the envelope's messages are."""
    received: list[bytes] = []
    buffer = b""
    while len(received) < len(_REPORTS):
        while len(buffer) >= _FRAME.size and len(buffer) >= _FRAME.size + (
            size := _FRAME.unpack_from(buffer)[0]
        ):
            received.append(msgspec.msgpack.decode(buffer[_FRAME.size : _FRAME.size + size]))
            buffer = buffer[_FRAME.size + size :]
        if len(received) == len(_REPORTS):
            break
        try:
            data = sock.recv(65_536)
        except BlockingIOError:
            await anyio.wait_readable(sock)
            continue
        if not data:
            break
        buffer += data
    return received


class Required:
    """What every jigcmd call does beside the shape: a digest, three transactions, two bundles."""

    def __init__(self, database: str) -> None:
        self.db = sqlite3.connect(database, isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS operations (operation_id TEXT PRIMARY KEY,"
            " signature TEXT NOT NULL, created_unix_ms INTEGER NOT NULL, state TEXT NOT NULL,"
            " plan_digest TEXT, result BLOB, attestation BLOB) STRICT"
        )
        self.wal = os.open(database + "-wal", os.O_RDONLY | os.O_CLOEXEC)
        self.key = Ed25519PrivateKey.generate()

    def _write(self, sql: str, values: tuple[object, ...], *, durable: bool) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute(sql, values)
        self.db.execute("COMMIT")
        if durable:
            os.fdatasync(self.wal)

    def begin(self, request: dict[str, Any]) -> str:
        """The request's digest and its durable row, before the gate opens."""
        signature = hashlib.sha256(msgspec.json.encode(request, order="sorted")).hexdigest()
        operation = request["params"]["operationId"]
        self._write(
            "INSERT INTO operations VALUES (?, ?, ?, 'running', ?, NULL, NULL)",
            (operation, signature, time.time_ns() // 1_000_000, "sha256:" + signature),
            durable=True,
        )
        return str(operation)

    def bundle(self, value: dict[str, Any], cleanup: str) -> bytes:
        """Two signed statements (the run's, the tests'), as a DSSE bundle."""
        envelopes = []
        for kind in ("run", "tests"):
            statement = _statement(kind, value, cleanup)
            body = msgspec.json.encode(statement, order="sorted")
            pae = b"DSSEv1 %d %b %d %b" % (len(_PAYLOAD_TYPE), _PAYLOAD_TYPE, len(body), body)
            signature = base64.b64encode(self.key.sign(pae)).decode()
            envelopes.append(
                {
                    "payload": base64.b64encode(body).decode(),
                    "payloadType": _PAYLOAD_TYPE.decode(),
                    "signatures": [{"keyid": "model", "sig": signature}],
                }
            )
        return msgspec.json.encode(envelopes)

    def evidence(self, operation: str, value: dict[str, Any]) -> None:
        """The run's end, its first statement with it, durable before the answer."""
        result = msgspec.json.encode(value)
        self._write(
            "UPDATE operations SET result = ?, attestation = ? WHERE operation_id = ?",
            (result, self.bundle(value, "unconfirmed"), operation),
            durable=True,
        )

    def close(self, operation: str, value: dict[str, Any]) -> bytes:
        """The row closed with the final statement, which the answer carries."""
        attestation = self.bundle(value, "complete")
        self._write(
            "UPDATE operations SET state = 'done', attestation = ? WHERE operation_id = ?",
            (attestation, operation),
            durable=False,
        )
        return attestation


_PAYLOAD_TYPE = b"application/vnd.in-toto+json"


def _statement(kind: str, value: dict[str, Any], cleanup: str) -> dict[str, Any]:
    digest = {"sha256": hashlib.sha256(value["stdout"].encode()).hexdigest()}
    return {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [
            {"name": "candidate", "digest": digest, "mediaType": "application/json"},
            {"name": "stdout", "digest": digest},
            {"name": "stderr", "digest": digest},
        ],
        "predicateType": f"https://jigcmd.dev/{kind}/v1",
        "predicate": {
            "run": {"operationId": "x" * 32, "runId": "y" * 16, "rootRun": "z" * 16},
            "command": {"name": "tests", "kind": "test", "invocation": ["bun", "test", "a"]},
            "admission": {"lock": digest, "binding": digest, "contract": digest},
            "runtime": {"name": "bun", "version": "1.4.2", "digest": digest},
            "envelope": {"profile": "candidate", "namespaces": ["user", "pid", "net"]},
            "ending": {
                "exitCode": value["exitCode"],
                "signal": None,
                "stopReason": "exited",
                "cleanup": cleanup,
                "stdout": {"bytes": len(value["stdout"]), "truncated": False},
                "stderr": {"bytes": len(value["stderr"]), "truncated": False},
            },
            "startedOn": "2026-12-06T05:00:00.000Z",
            "finishedOn": "2026-12-06T05:00:00.010Z",
            "host": {"keyId": "model", "jigcmdVersion": "0"},
        },
    }


async def _call(line: bytes, control: socket.socket, required: Required | None) -> None:
    request: dict[str, Any] = msgspec.json.decode(line)
    out_r, out_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    err_r, err_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    gate_r, gate_w = os.pipe2(os.O_CLOEXEC)
    run, run_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    run.setblocking(False)
    launch = msgspec.msgpack.encode({"id": request["id"], "params": request["params"]})
    socket.send_fds(control, [launch], [out_w, err_w, gate_r, run_peer.fileno()])
    for fd in (out_w, err_w, gate_r):
        os.close(fd)
    run_peer.close()
    operation = required.begin(request) if required is not None else ""
    os.write(gate_w, b"g")
    os.close(gate_w)
    stdout: list[bytes] = []
    stderr: list[bytes] = []
    async with anyio.create_task_group() as pumps:
        pumps.start_soon(_pump, out_r, stdout)
        pumps.start_soon(_pump, err_r, stderr)
        reports = await _reports(run)
    run.close()
    value = {
        "exitCode": 0 if len(reports) == len(_REPORTS) else 1,
        "stdout": b"".join(stdout).decode(),
        "stderr": b"".join(stderr).decode(),
    }
    if required is not None:
        required.evidence(operation, value)
        value["attestation"] = required.close(operation, value).decode()
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": {"value": value}}
    os.write(1, msgspec.json.encode(answer) + b"\n")


async def _model_server(control: socket.socket, required: Required | None) -> None:
    os.set_blocking(0, False)
    pending = b""
    async with anyio.create_task_group() as calls:
        while True:
            await anyio.wait_readable(0)
            try:
                chunk = os.read(0, 65_536)
            except BlockingIOError:
                continue
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                calls.start_soon(_call, line, control, required)


def _serve_model(database: str | None) -> None:
    """The model server: its peer started, then the anyio loop until stdin ends."""
    control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    peer = subprocess.Popen(
        [sys.executable, __file__, "--model-peer", str(theirs.fileno())],
        pass_fds=(theirs.fileno(),),
    )
    theirs.close()
    anyio.run(_model_server, control, Required(database) if database is not None else None)
    control.close()
    peer.wait()


def _model_peer(fd: int) -> None:
    """The zygote's stand-in: a launch in, a line on each pipe and three reports out."""
    control = socket.socket(fileno=fd)
    while True:
        message, fds, _flags, _address = socket.recv_fds(control, 65_536, 4)
        if not message:
            return
        out_w, err_w, gate_r, run_fd = fds
        run = socket.socket(fileno=run_fd)
        os.read(gate_r, 1)
        os.close(gate_r)
        _send_frame(run, msgspec.msgpack.encode(_REPORTS[0]))
        os.write(out_w, _OUTPUT)
        os.write(err_w, _OUTPUT)
        os.close(out_w)
        os.close(err_w)
        for report in _REPORTS[1:]:
            _send_frame(run, msgspec.msgpack.encode(report))
        run.close()


# -- the benchmark -----------------------------------------------------------------------


class Model:
    """A model server process, called as `Serve` calls `jigcmd serve`."""

    def __init__(self, database: Path | None = None) -> None:
        required = [] if database is None else [str(database)]
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--model-server", *required],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.count = 0

    def run(self) -> float:
        self.count += 1
        call = {
            "jsonrpc": "2.0",
            "id": f"m{self.count}",
            "method": "capability/call",
            "params": {"operationId": f"model-{secrets.token_hex(8)}", "input": {}},
        }
        started = time.perf_counter()
        self.stdin.write(msgspec.json.encode(call) + b"\n")
        self.stdin.flush()
        answer = msgspec.json.decode(self.stdout.readline())
        if answer["result"]["value"]["exitCode"] != 0:
            raise SystemExit(f"the model server's call failed: {answer}")
        return time.perf_counter() - started

    def close(self) -> None:
        self.stdin.close()
        self.process.wait(timeout=30)
        self.stdout.close()


def run_ns(pid: int) -> int:
    """The CPU time every thread of `pid` has run (schedstat, nanoseconds)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as handle:
                total += int(handle.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a worker thread that ended meanwhile
    return total


def block(server: Model | Serve, calls: int, idle: float) -> float:
    """The server's CPU ms per call over `calls` calls."""
    before = run_ns(server.process.pid)
    for _ in range(calls):
        if idle:
            time.sleep(idle)
        server.run()
    return (run_ns(server.process.pid) - before) / calls / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per block")
    parser.add_argument("--rounds", type=int, default=3, help="blocks of each server")
    parser.add_argument("--idle-ms", type=float, default=0.0, help="idle before each call")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: jigcmd serve needs it")
    with tempfile.TemporaryDirectory(prefix="jigcmd-shell-floor-") as workdir:
        lock = Path(workdir) / "jigcmd.lock"
        admit(lock)
        servers: dict[str, Model | Serve] = {
            "model": Model(),
            "model+": Model(Path(workdir) / "model.db"),
            "jigcmd": Serve(lock, Path(workdir) / "state"),
        }
        spent: dict[str, list[float]] = {name: [] for name in servers}
        try:
            for server in servers.values():
                for _ in range(20):
                    server.run()
            for _ in range(args.rounds):
                for name, server in servers.items():
                    spent[name].append(block(server, args.calls, args.idle_ms / 1000))
        finally:
            for server in servers.values():
                server.close()
    print(
        f"{args.rounds} rounds of {args.calls} calls each, {args.idle_ms:g} ms idle before each;"
        " the server's CPU ms per call (all its threads), median of rounds (rounds)"
    )
    for name, values in spent.items():
        rounds = " / ".join(f"{value:.3f}" for value in values)
        print(f"  {name:<8}{statistics.median(values):8.3f}   ({rounds})")
    jigcmd = statistics.median(spent["jigcmd"])
    shape = statistics.median(spent["model"]) / jigcmd
    required = statistics.median(spent["model+"]) / jigcmd
    print(
        f"The shape alone is {shape:.2f}x jigcmd's server; with the work every call must do"
        f" (digest, journal, statements) {required:.2f}x."
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--model-server"]:
        _serve_model(sys.argv[2] if len(sys.argv) > 2 else None)
    elif sys.argv[1:2] == ["--model-peer"]:
        _model_peer(int(sys.argv[2]))
    else:
        main()
