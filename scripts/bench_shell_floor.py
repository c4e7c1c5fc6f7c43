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

The peer answers at once, so the model servers above run call after call with the CPU's
caches as they left them; jigcmd's server never does (Bun runs ~8 ms between two of its
calls). `/bun` rows have the peer run the same `bun test` as the `bare` rung of
`bench_floor.py` between the gate and the reports, its output the pipes' (`--no-bun` leaves
them out). `model+/bun+N` (`--breadth N`, 0 for none) adds N distinct small functions to
each call, each a few lines of the kind a call path is made of (a check, an object of its
own class made, a tuple and a dict returned), every one run once a call: the slope of the
server's CPU against N is what each distinct function a call touches costs with the caches
a call meets, and `jigcmd serve`'s call touches ~430 (docs/envelope.md, "The
twenty-second round").

Blocks of `--calls` calls of each model server and of `jigcmd serve` (the bundled example's
`bun test`, as `bench_floor.py` calls it) alternate `--rounds` times; each server's CPU is
the sum of its threads' `schedstat` run time over the block, per call.

Run as root (jigcmd serve needs it): python scripts/bench_shell_floor.py [--calls 200]
[--rounds 3] [--idle-ms 0] [--breadth 200] [--no-bun]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import secrets
import shutil
import socket
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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

from jigcmd.command.runtime import find_runtime  # noqa: E402 - likewise
from scripts.bench_envelope import PASSING, TEST_ARGV, Serve, admit  # noqa: E402 - likewise

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


# One distinct function of a call path: a check, an object of its own class, a tuple and a
# dict made. Each copy has its own code, constants, class and globals' names.
_PIECE = """
class Piece{i}:
    __slots__ = ("value", "count", "name")

    def __init__(self, value, count, name):
        self.value = value
        self.count = count
        self.name = name


def piece{i}(request, seen):
    if not isinstance(request, dict) or "params" not in request:
        raise ValueError("piece{i}: not a call")
    made = Piece{i}(request.get("k{i}", {i}), len(seen), "piece-{i}")
    if made.value > {i} + 1_000_000:
        seen.append(made)
    return (made.value + made.count, made.name, {{"p{i}": made.value}})
"""

Piece = Callable[[dict[str, Any], list[object]], object]


def breadth(count: int) -> list[Piece]:
    """`count` distinct functions, as many modules' worth of code as a call path touches."""
    namespace: dict[str, Any] = {}
    # The benchmark's own generated source, nothing read from outside.
    exec(
        compile("".join(_PIECE.format(i=i) for i in range(count)), "<breadth>", "exec"),
        namespace,
    )
    return [namespace[f"piece{i}"] for i in range(count)]


def _run_pieces(pieces: list[Piece], request: dict[str, Any]) -> None:
    seen: list[object] = []
    for piece in pieces:
        piece(request, seen)


async def _call(
    line: bytes, control: socket.socket, required: Required | None, pieces: list[Piece]
) -> None:
    request: dict[str, Any] = msgspec.json.decode(line)
    # Half of the breadth before the launch, half after the run: a call path's two ends.
    half = len(pieces) // 2
    _run_pieces(pieces[:half], request)
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
    _run_pieces(pieces[half:], request)
    if required is not None:
        required.evidence(operation, value)
        value["attestation"] = required.close(operation, value).decode()
    answer = {"jsonrpc": "2.0", "id": request["id"], "result": {"value": value}}
    os.write(1, msgspec.json.encode(answer) + b"\n")


async def _model_server(
    control: socket.socket, required: Required | None, pieces: list[Piece]
) -> None:
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
                calls.start_soon(_call, line, control, required, pieces)


def _serve_model(options: argparse.Namespace) -> None:
    """The model server: its peer started, then the anyio loop until stdin ends."""
    control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    peer = [sys.executable, __file__, "--model-peer", "--fd", str(theirs.fileno())]
    if options.bun is not None:
        peer += ["--bun", options.bun, "--cwd", options.cwd]
    process = subprocess.Popen(peer, pass_fds=(theirs.fileno(),))
    theirs.close()
    required = Required(options.db) if options.db is not None else None
    anyio.run(_model_server, control, required, breadth(options.breadth))
    control.close()
    process.wait()


def _model_peer(options: argparse.Namespace) -> None:
    """The zygote's stand-in: a launch in, the pipes written (or Bun's), three reports out."""
    control = socket.socket(fileno=options.fd)
    while True:
        message, fds, _flags, _address = socket.recv_fds(control, 65_536, 4)
        if not message:
            return
        out_w, err_w, gate_r, run_fd = fds
        run = socket.socket(fileno=run_fd)
        os.read(gate_r, 1)
        os.close(gate_r)
        _send_frame(run, msgspec.msgpack.encode(_REPORTS[0]))
        if options.bun is None:
            os.write(out_w, _OUTPUT)
            os.write(err_w, _OUTPUT)
        else:
            subprocess.run(
                [options.bun, *TEST_ARGV],
                cwd=options.cwd,
                env={},
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                check=True,
            )
        os.close(out_w)
        os.close(err_w)
        for report in _REPORTS[1:]:
            _send_frame(run, msgspec.msgpack.encode(report))
        run.close()


def _child_options(argv: list[str]) -> argparse.Namespace:
    """The model server's and its peer's own command line (this file runs as both)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", help="model+: the journal's database")
    parser.add_argument("--bun", help="the peer runs this Bun's `bun test` between gate and end")
    parser.add_argument("--cwd", help="the project the peer's Bun tests")
    parser.add_argument("--breadth", type=int, default=0, help="distinct functions a call runs")
    parser.add_argument("--fd", type=int, help="the peer's control socket")
    return parser.parse_args(argv)


# -- the benchmark -----------------------------------------------------------------------


class Model:
    """A model server process, called as `Serve` calls `jigcmd serve`."""

    def __init__(
        self,
        database: Path | None = None,
        *,
        bun: tuple[str, Path] | None = None,
        breadth: int = 0,
    ) -> None:
        argv = [sys.executable, __file__, "--model-server", "--breadth", str(breadth)]
        if database is not None:
            argv += ["--db", str(database)]
        if bun is not None:
            argv += ["--bun", bun[0], "--cwd", str(bun[1])]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
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


def _servers(workdir: Path, args: argparse.Namespace) -> dict[str, Model | Serve]:
    """Every server of the run, by its row's name; jigcmd's last."""
    lock = workdir / "jigcmd.lock"
    admit(lock)
    servers: dict[str, Model | Serve] = {
        "model": Model(),
        "model+": Model(workdir / "model.db"),
    }
    if not args.no_bun:
        project = workdir / "project"
        shutil.copytree(PASSING, project)
        bun = (find_runtime().path, project)
        servers["model/bun"] = Model(bun=bun)
        servers["model+/bun"] = Model(workdir / "model-bun.db", bun=bun)
        if args.breadth:
            servers[f"model+/bun+{args.breadth}"] = Model(
                workdir / "model-breadth.db", bun=bun, breadth=args.breadth
            )
    servers["jigcmd"] = Serve(lock, workdir / "state")
    return servers


def _report(spent: dict[str, list[float]], args: argparse.Namespace) -> None:
    print(
        f"{args.rounds} rounds of {args.calls} calls each, {args.idle_ms:g} ms idle before each;"
        " the server's CPU ms per call (all its threads), median of rounds (rounds)"
    )
    median = {name: statistics.median(values) for name, values in spent.items()}
    for name, values in spent.items():
        rounds = " / ".join(f"{value:.3f}" for value in values)
        print(f"  {name:<18}{median[name]:8.3f}   ({rounds})")
    jigcmd = median["jigcmd"]
    for suffix, between in (("", "the peer answering at once"), ("/bun", "Bun between")):
        if f"model+{suffix}" in median:
            print(
                f"With {between}: the shape alone is {median['model' + suffix] / jigcmd:.2f}x"
                " jigcmd's server; with the work every call must do (digest, journal,"
                f" statements) {median['model+' + suffix] / jigcmd:.2f}x."
            )
    wide = f"model+/bun+{args.breadth}"
    if wide in median:
        slope = (median[wide] - median["model+/bun"]) / args.breadth * 1000
        print(
            f"Each distinct function a call runs: {slope:.2f} µs of the server's CPU (Bun"
            f" between); jigcmd's server over model+/bun, {jigcmd - median['model+/bun']:.2f} ms,"
            f" is {(jigcmd - median['model+/bun']) * 1000 / slope:.0f} such functions"
            if slope > 0
            else "No slope: the breadth cost nothing measurable in this run."
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per block")
    parser.add_argument("--rounds", type=int, default=3, help="blocks of each server")
    parser.add_argument("--idle-ms", type=float, default=0.0, help="idle before each call")
    parser.add_argument(
        "--breadth", type=int, default=200, help="distinct functions of the widest model (0: none)"
    )
    parser.add_argument("--no-bun", action="store_true", help="no model whose peer runs Bun")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: jigcmd serve needs it")
    with tempfile.TemporaryDirectory(prefix="jigcmd-shell-floor-") as workdir:
        servers = _servers(Path(workdir), args)
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
    _report(spent, args)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--model-server"]:
        _serve_model(_child_options(sys.argv[2:]))
    elif sys.argv[1:2] == ["--model-peer"]:
        _model_peer(_child_options(sys.argv[2:]))
    else:
        main()
