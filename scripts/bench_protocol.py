"""Protocol benchmark (not a test): jigcmd's stdio server against the official MCP SDK server.

For each server it measures the time from spawn to the `initialize` answer, the idle RSS after
the handshake, and pipelined throughput (messages answered per second) for `ping`,
`tools/list` and, for jigcmd, invalid `capability/call` frames (in a Run/1 session).

    python scripts/bench_protocol.py                        # fake backend (tests/protocol)
    python scripts/bench_protocol.py --server "python -m jigcmd serve --binding B.toml"
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FAKE_SERVER = REPO / "tests" / "protocol" / "fake_server.py"
SDK_SERVER = REPO / "scripts" / "bench_sdk_server.py"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def frame(message: object) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def idle_rss_mib(pid: int) -> float:
    """Resident set size of `pid` from /proc, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Peer:
    """A spawned server with the handshake timed."""

    def __init__(
        self, argv: list[str], *, mcp: bool = True, env: dict[str, str] | None = None
    ) -> None:
        env = dict(os.environ) | (env or {})
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        started = time.perf_counter()
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.stdin = self.process.stdin
        self.stdout = self.process.stdout
        self.initialize_ms = float("nan")
        if mcp:
            self.stdin.write(frame(INITIALIZE))
            self.stdin.flush()
            self.stdout.readline()
            self.initialize_ms = (time.perf_counter() - started) * 1000
            self.stdin.write(frame(INITIALIZED))
            self.stdin.flush()
        # Let start-up allocations settle into the idle footprint before reading RSS.
        self.ping_round_trip()
        self.rss_mib = idle_rss_mib(self.process.pid)

    def startup(self) -> str:
        return (
            f"initialize answered {self.initialize_ms:.0f} ms after spawn; "
            f"idle RSS {self.rss_mib:.1f} MiB"
        )

    def tools(self) -> list[Any]:
        self.stdin.write(frame({"jsonrpc": "2.0", "id": "tools", "method": "tools/list"}))
        self.stdin.flush()
        tools: list[Any] = json.loads(self.stdout.readline())["result"]["tools"]
        return tools

    def ping_round_trip(self) -> None:
        self.stdin.write(frame({"jsonrpc": "2.0", "id": "warm", "method": "ping"}))
        self.stdin.flush()
        self.stdout.readline()

    def pipeline(self, frames: list[bytes]) -> tuple[float, dict[str, int]]:
        """Write all frames from a thread while reading the answers; messages/s and answer kinds."""
        payload = b"".join(frames)

        def write() -> None:
            self.stdin.write(payload)
            self.stdin.flush()

        kinds: dict[str, int] = {}
        started = time.perf_counter()
        writer = threading.Thread(target=write)
        writer.start()
        for _ in frames:
            line = self.stdout.readline()
            # Decoding every large tools/list answer would measure this client, not the server.
            if b'"result":' in line[:64]:
                kind = "result"
            else:
                error: dict[str, Any] = json.loads(line)["error"]
                kind = str(error.get("data", {}).get("code", error["code"]))
            kinds[kind] = kinds.get(kind, 0) + 1
        elapsed = time.perf_counter() - started
        writer.join()
        return len(frames) / elapsed, kinds

    def close(self) -> None:
        self.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def requests(method: str, count: int, params: object = None) -> list[bytes]:
    out = []
    for i in range(count):
        message: dict[str, object] = {"jsonrpc": "2.0", "id": i + 1, "method": method}
        if params is not None:
            message["params"] = params
        out.append(frame(message))
    return out


def invalid_calls(count: int) -> list[bytes]:
    """Run/1 calls whose params break the shape (operationId grammar): refused before dispatch."""
    return [
        frame(
            {
                "jsonrpc": "2.0",
                "id": f"c{i}",
                "method": "capability/call",
                "params": {"operationId": "-bad", "slot": "command", "method": "run", "input": {}},
            }
        )
        for i in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=f"{shlex.quote(sys.executable)} {FAKE_SERVER}")
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--sdk-count", type=int, default=5_000)
    args = parser.parse_args()

    argv = shlex.split(args.server)
    rows: list[tuple[str, str, float, dict[str, int]]] = []

    ours = Peer(argv)
    print(f"jigcmd:  {ours.startup()}")
    tools = ours.tools()
    for method in ("ping", "tools/list"):
        rate, kinds = ours.pipeline(requests(method, args.count))
        rows.append(("jigcmd", method, rate, kinds))
    ours.close()

    flow = Peer(argv, mcp=False)
    rate, kinds = flow.pipeline(invalid_calls(args.count))
    rows.append(("jigcmd", "capability/call (invalid)", rate, kinds))
    flow.close()

    sdk = Peer([sys.executable, str(SDK_SERVER)], env={"JIGCMD_BENCH_TOOLS": json.dumps(tools)})
    print(f"mcp-sdk: {sdk.startup()}")
    for method in ("ping", "tools/list"):
        rate, kinds = sdk.pipeline(requests(method, args.sdk_count))
        rows.append(("mcp-sdk lowlevel", method, rate, kinds))
    sdk.close()

    for server, method, rate, kinds in rows:
        print(f"{server:17} {method:27} {rate:10,.0f} msg/s  {kinds}")
    rates = {(server, method): rate for server, method, rate, _ in rows}
    for method in ("ping", "tools/list"):
        ratio = rates[("jigcmd", method)] / rates[("mcp-sdk lowlevel", method)]
        print(f"ratio jigcmd / mcp-sdk on {method}: {ratio:.1f}x")


if __name__ == "__main__":
    main()
