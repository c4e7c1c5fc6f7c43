"""Two revisions under concurrent sessions, side by side: each call's latency, and the rate.

Each revision (a git worktree made for it, or the working tree for `.`) runs `--sessions`
`jigcmd serve` processes sharing one state directory (one journal, one slot queue), as
sessions on one host do. In each round one revision's sessions call at once, each back to
back (`bun test` on the bundled example), `--calls` calls in all; then the other's (the
order flips every round, and the other revision's servers idle meanwhile). Prints, per
revision, each call's latency at the median, p90, p99 and the longest, the runs per second
(the median of the rounds), and the median of the per-round ratios of the rate and of the
p90 with a 95% bootstrap interval (rounds are neighbours in time; an interval that spans
1.0 means the run cannot tell the revisions apart). What it shows that one session cannot:
the cost of the sessions' shared state, the journal's write lock above all.

Run as root: python scripts/bench_sessions.py BASE [CANDIDATE] [--sessions 4] [--calls 240]
[--rounds 4] (CANDIDATE defaults to `.`, the working tree).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout: the sibling benchmark must be importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench_envelope import Serve  # noqa: E402 - needs the path set up above
from scripts.bench_revisions import (  # noqa: E402 - likewise
    WARMUP,
    Revision,
    paired_interval,
    remove_work,
)

# Idle before each round, so that neither revision's round pays for the other's refills.
ROUND_SETTLE_S = 0.5


class Sessions:
    """One revision's concurrent sessions and what its rounds measured."""

    def __init__(self, revision: Revision, count: int) -> None:
        self.revision = revision
        self.servers = [revision.server, *(revision.serve() for _ in range(count - 1))]
        self.calls: list[float] = []
        self.rates: list[float] = []
        self.p90s: list[float] = []

    def warm(self) -> None:
        for server in self.servers:
            for _ in range(WARMUP):
                server.run()

    def round(self, calls: int) -> None:
        """Every session calling back to back at once, `calls` in all."""
        per_session = max(1, calls // len(self.servers))
        times: list[float] = []
        barrier = threading.Barrier(len(self.servers) + 1)

        def work(server: Serve) -> None:
            barrier.wait()
            for _ in range(per_session):
                times.append(server.run() * 1000)

        threads = [threading.Thread(target=work, args=(server,)) for server in self.servers]
        for thread in threads:
            thread.start()
        barrier.wait()
        started = time.perf_counter()
        for thread in threads:
            thread.join()
        self.rates.append(len(times) / (time.perf_counter() - started))
        self.p90s.append(_quantile(sorted(times), 0.9))
        self.calls.extend(times)

    def close(self) -> None:
        for server in self.servers:
            server.close()


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(sides: list[Sessions], options: argparse.Namespace) -> None:
    print(
        f"{options.rounds} rounds of {options.calls} calls over {options.sessions} sessions"
        " (one state directory per revision), each session back to back"
    )
    print(f"{'revision':24} {'median':>7} {'p90':>7} {'p99':>7} {'max':>7} {'runs/s':>7}")
    for side in sides:
        ordered = sorted(side.calls)
        print(
            f"{side.revision.name:24} {statistics.median(ordered):7.2f}"
            f" {_quantile(ordered, 0.9):7.2f} {_quantile(ordered, 0.99):7.2f}"
            f" {ordered[-1]:7.2f} {statistics.median(side.rates):7.1f}"
        )
    base, candidate = sides
    for label, values in (("runs/s", "rates"), ("p90", "p90s")):
        ratios = [
            c / b for b, c in zip(getattr(base, values), getattr(candidate, values), strict=True)
        ]
        median, low, high = paired_interval(ratios)
        print(
            f"candidate / base, {label} per round: {median:.2f}x,"
            f" 95% interval [{low:.2f}, {high:.2f}]"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="a git revision")
    parser.add_argument("candidate", nargs="?", default=".", help="a revision, or . (default)")
    parser.add_argument("--sessions", type=int, default=4, help="servers calling at once")
    parser.add_argument("--calls", type=int, default=240, help="calls per revision and round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds, alternating")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jigcmd-bench-sessions-"))
    sides: list[Sessions] = []
    try:
        for name in (options.base, options.candidate):
            sides.append(Sessions(Revision(name, work), max(1, options.sessions)))
        for side in sides:
            side.warm()
        for number in range(options.rounds):
            for side in sides if number % 2 == 0 else sides[::-1]:
                time.sleep(ROUND_SETTLE_S)
                side.round(options.calls)
    finally:
        for side in sides:
            side.close()
        remove_work(work)
    report(sides, options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
