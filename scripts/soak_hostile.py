"""Soak under a hostile peer: `jigcmd serve`'s memory stays bounded however the peer misbehaves.

    python scripts/soak_hostile.py                       # 100,000 refused calls, 6M unread pings
    python scripts/soak_hostile.py --refused 20000 --pings 1000000

Two peers, each against its own real `jigcmd serve` (the bundled example's Binding, a
temporary state directory):

- refused: Run/1 calls the server refuses before dispatch (non-empty `channels`), each with a
  new `operationId`, answers read as they come. Refusals are not remembered, so the RSS
  stays flat.
- unread: pings written as fast as the pipe takes them while nobody reads stdout. Past its
  output backlog bound the server stops reading input, so the writer ends up blocked (it
  gives up once no byte went through for a second) and the RSS stays bounded.

It prints the server's RSS at the start and the end of each phase and exits 1 when either
grew by more than its bound, 2 when the server broke, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BINDING = REPO / "jigcmd" / "example" / "binding.toml"
# Allowed RSS growth per phase.
REFUSED_BOUND_KIB = 16 * 1024
UNREAD_BOUND_KIB = 32 * 1024
# The writer gives up once no byte went through for this long (the server stopped reading).
STILL_S = 1.0
FAILSAFE_S = 600.0


def rss_kib(pid: int) -> int:
    """The process's resident set size in KiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def start_server(state_dir: Path) -> subprocess.Popen[bytes]:
    """A real `jigcmd serve` on pipes, answering a first ping (so its baseline is its idle RSS)."""
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "jigcmd", "serve", "--binding", str(BINDING)),
            *("--state-dir", str(state_dir), "--protocol", "flow"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(b'{"jsonrpc":"2.0","id":"ready","method":"ping"}\n')
    server.stdin.flush()
    if not server.stdout.readline().startswith(b'{"jsonrpc":"2.0","id":"ready"'):
        raise RuntimeError("the server did not answer its first ping")
    return server


def refused_calls(state_dir: Path, count: int) -> tuple[int, int]:
    """RSS (KiB) before and after `count` refused calls with distinct operation ids."""
    server = start_server(state_dir)
    assert server.stdin is not None and server.stdout is not None
    stdout = server.stdout
    answered = [0]

    def read_answers() -> None:
        for line in stdout:
            if b'"UNAVAILABLE"' in line:
                answered[0] += 1

    reader = threading.Thread(target=read_answers, daemon=True)
    reader.start()
    before = rss_kib(server.pid)
    batch = []
    for index in range(count):
        params = {
            "operationId": f"op-refused-{index}",
            "slot": "command",
            "method": "run",
            "input": {},
            "channels": {"x": {}},
        }
        message = {"jsonrpc": "2.0", "id": f"r-{index}", "method": "capability/call"}
        batch.append(json.dumps({**message, "params": params}).encode() + b"\n")
        if len(batch) == 1000:
            server.stdin.write(b"".join(batch))
            batch = []
    server.stdin.write(b"".join(batch))
    server.stdin.flush()
    deadline = time.monotonic() + FAILSAFE_S
    while answered[0] < count and time.monotonic() < deadline and server.poll() is None:
        time.sleep(0.05)
    after = rss_kib(server.pid)
    server.stdin.close()
    server.wait(timeout=30)
    if answered[0] < count:
        raise RuntimeError(f"only {answered[0]:,} of {count:,} refused calls were answered")
    return before, after


def unread_pings(state_dir: Path, count: int) -> tuple[int, int, int]:
    """RSS (KiB) before and after pinging a peer that never reads; and the bytes it accepted."""
    server = start_server(state_dir)
    assert server.stdin is not None
    stdin_fd = server.stdin.fileno()
    ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
    block = ping * 1000
    total = len(ping) * count
    written = [0]

    def write_pings() -> None:
        try:
            while written[0] < total:
                written[0] += os.write(stdin_fd, block[: total - written[0]])
        except OSError:
            return

    before = rss_kib(server.pid)
    threading.Thread(target=write_pings, daemon=True).start()
    progress, since = -1, time.monotonic()
    deadline = since + FAILSAFE_S
    while written[0] < total and time.monotonic() < deadline:
        if written[0] != progress:
            progress, since = written[0], time.monotonic()
        elif time.monotonic() - since >= STILL_S:
            break
        time.sleep(0.05)
    after = rss_kib(server.pid)
    server.kill()
    server.wait(timeout=30)
    return before, after, written[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--refused", type=int, default=100_000, help="refused calls (100,000)")
    parser.add_argument("--pings", type=int, default=6_000_000, help="unread pings (6,000,000)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jigcmd-soak-hostile-") as scratch:
        try:
            r_before, r_after = refused_calls(Path(scratch) / "refused", args.refused)
            u_before, u_after, accepted = unread_pings(Path(scratch) / "unread", args.pings)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            print(f"server broke: {exc}")
            return 2
    print(f"{'phase':<10} {'RSS before':>12} {'RSS after':>12} {'growth':>10} {'bound':>10}")
    print(
        f"{'refused':<10} {r_before:>9,} KiB {r_after:>9,} KiB {r_after - r_before:>6,} KiB"
        f" {REFUSED_BOUND_KIB:>6,} KiB  ({args.refused:,} refused calls, all answered)"
    )
    sent = accepted // len(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    print(
        f"{'unread':<10} {u_before:>9,} KiB {u_after:>9,} KiB {u_after - u_before:>6,} KiB"
        f" {UNREAD_BOUND_KIB:>6,} KiB  ({sent:,} of {args.pings:,} pings taken, no answer read)"
    )
    grew = []
    if r_after - r_before > REFUSED_BOUND_KIB:
        grew.append("refused")
    if u_after - u_before > UNREAD_BOUND_KIB:
        grew.append("unread")
    if grew:
        print(f"NOT bounded: {', '.join(grew)}")
        return 1
    print("bounded: memory stayed within its bound under both hostile peers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
