"""Soak under a hostile peer: `jigcmd serve`'s memory stays bounded however the peer misbehaves,
and `jigcmd jarvis` keeps answering its authorized callers whatever its neighbours do.

    python scripts/soak_hostile.py                       # 100,000 refused calls, 6M unread pings
    python scripts/soak_hostile.py --refused 20000 --pings 1000000
    python scripts/soak_hostile.py --only jarvis         # 1,000 half-open, 1,000 at once, 200 slow

Two peers, each against its own real `jigcmd serve` (the bundled example's Binding, a
temporary state directory):

- refused: Run/1 calls the server refuses before dispatch (non-empty `channels`), each with a
  new `operationId`, answers read as they come. Refusals are not remembered, so the RSS
  stays flat.
- unread: pings written as fast as the pipe takes them while nobody reads stdout. Past its
  output backlog bound the server stops reading input, so the writer ends up blocked (it
  gives up once no byte went through for a second) and the RSS stays bounded.

Then three phases against a real `jigcmd jarvis` each (root and cgroups; see
`scripts/hostile_jarvis.py`): half-open connections with jarvis at 256 descriptors, that many
authorized calls at once, and slow bodies. For each it prints the connections jarvis held,
the authorized calls answered and their p99, and its RSS before and after.

It prints the server's RSS at the start and the end of each phase and exits 1 when any grew
by more than its bound, 2 when a server broke (or an authorized jarvis call went
unanswered), 0 otherwise.
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
# Run from a checkout: the jarvis phases live beside this script, in `scripts`.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scripts import hostile_jarvis  # noqa: E402 - needs the path set up above

BINDING = REPO / "jigcmd" / "example" / "binding.toml"
# Allowed RSS growth per phase.
REFUSED_BOUND_KIB = 16 * 1024
UNREAD_BOUND_KIB = 32 * 1024
JARVIS_BOUND_KIB = 32 * 1024
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
    parser.add_argument("--half-open", type=int, default=1000, help="jarvis: half-open (1,000)")
    parser.add_argument("--concurrent", type=int, default=1000, help="jarvis: at once (1,000)")
    parser.add_argument("--slow", type=int, default=200, help="jarvis: slow bodies (200)")
    parser.add_argument("--only", choices=("serve", "jarvis"), help="run only these phases")
    args = parser.parse_args()
    grew: list[str] = []
    if args.only != "jarvis":
        status = serve_phases(args, grew)
        if status:
            return status
    if args.only != "serve":
        status = jarvis_phases(args, grew)
        if status:
            return status
    if grew:
        print(f"NOT bounded: {', '.join(grew)}")
        return 1
    print("bounded: memory stayed within its bound under every hostile peer")
    return 0


def serve_phases(args: argparse.Namespace, grew: list[str]) -> int:
    """The `serve` phases; 2 when the server broke."""
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
    if r_after - r_before > REFUSED_BOUND_KIB:
        grew.append("refused")
    if u_after - u_before > UNREAD_BOUND_KIB:
        grew.append("unread")
    return 0


def jarvis_phases(args: argparse.Namespace, grew: list[str]) -> int:
    """The `jarvis` phases; 2 when jarvis broke or left an authorized call unanswered."""
    try:
        phases = hostile_jarvis.run_phases(args.half_open, args.concurrent, args.slow)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"jarvis broke: {exc}")
        return 2
    print(
        f"{'jarvis':<11} {'held':>5} {'answered':>11} {'p99':>9} "
        f"{'RSS before':>12} {'RSS after':>12}"
    )
    unanswered = []
    for phase in phases:
        p99 = "-" if phase.p99_ms is None else f"{phase.p99_ms:,.0f} ms"
        print(
            f"{phase.name:<11} {phase.held_peak:>5,} {phase.answered:>5,} of {phase.asked:<5,}"
            f"{p99:>9} {phase.rss_before_kib:>9,} KiB {phase.rss_after_kib:>9,} KiB  "
            f"({phase.note})"
        )
        if phase.answered < phase.asked and phase.name != "concurrent":
            unanswered.append(phase.name)
        if phase.rss_after_kib - phase.rss_before_kib > JARVIS_BOUND_KIB:
            grew.append(f"jarvis {phase.name}")
    if unanswered:
        print(f"jarvis left authorized calls unanswered: {', '.join(unanswered)}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
