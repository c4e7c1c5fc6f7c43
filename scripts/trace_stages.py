"""Where one call's time goes: the median gap before each traced stage, over many calls.

Starts one `jigcmd serve` with `JIGCMD_TRACE=1` (every process of the envelope writes
`jigcmd-trace <monotonic ms> <pid> <cpu ms> <minor faults> <label>` to stderr, see
`jigcmd/trace.py`), sends `bun test` calls on the bundled example with `--idle-ms` of idle
before each, and prints, per stage in the order of the first call, the median time since the
previous stage, and the median CPU and pages faulted in by the marking process since its own
previous mark (the envelope's processes mark where they block until a request, "... waiting",
so their first stage counts only the run's work; the server's "readable" also counts what it
did after the previous answer). Then pid 1's own steps, its preparation (between the calls)
included. Last, the calls as one timeline: each stage's median time relative to the
`--anchor` stage of the same call (by default the server's "executor: ended", the candidate's
end as the server hears of it), so that stages of different processes that overlap can be
read against each other, which gaps between consecutive stages cannot show. Tracing itself
costs a little at every mark; compare runs of this script, not its totals with the
benchmark's.

Run as root: python scripts/trace_stages.py [--calls 30] [--idle-ms 100] [--anchor LABEL]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout: the sibling benchmark (and the package) must be importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench_envelope import Serve, admit  # noqa: E402 - needs the path set up above

WARMUP = 3
ANCHOR = "executor: ended"
ANSWER = "(answer read by the client)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30, help="measured calls")
    parser.add_argument("--idle-ms", type=float, default=100.0, help="idle before each call")
    parser.add_argument(
        "--anchor", default=ANCHOR, help=f"the timeline's zero, a stage's label ({ANCHOR!r})"
    )
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jigcmd-trace-") as tmp:
        work = Path(tmp)
        lock = work / "jigcmd.lock"
        admit(lock)
        log_path = work / "stderr"
        with log_path.open("wb") as log:
            trace_env = {**os.environ, "JIGCMD_TRACE": "1"}
            server = Serve(lock, work / "state", env=trace_env, stderr=log)
            windows: list[tuple[float, float]] = []
            for number in range(WARMUP + options.calls):
                time.sleep(options.idle_ms / 1000)
                start = time.monotonic() * 1000
                server.run()
                if number >= WARMUP:
                    windows.append((start, time.monotonic() * 1000))
            server.close()
        log_text = log_path.read_text(errors="replace")
    marks = [
        Mark(float(fields[1]), int(fields[2]), float(fields[3]), int(fields[4]), fields[5])
        for line in log_text.splitlines()
        if line.startswith("jigcmd-trace ") and len(fields := line.split(None, 5)) == 6
    ]
    marks.sort()
    report_calls(marks, windows, options)
    report_pid_1(marks, windows[0][0] if windows else 0.0)
    report_timeline(marks, windows, options.anchor)
    return 0


class Mark(NamedTuple):
    """One `jigcmd-trace` line."""

    stamp: float
    pid: int
    cpu: float
    faults: int
    label: str


def own_steps(marks: list[Mark]) -> list[tuple[float, int] | None]:
    """Per mark, the CPU ms and the pages its process spent since its own previous mark
    (None for a process's first: pid 1's `init: named`, a host pid reused or not)."""
    last: dict[int, Mark] = {}
    steps: list[tuple[float, int] | None] = []
    for mark in marks:
        before = None if mark.label == "init: named" else last.get(mark.pid)
        steps.append(
            None if before is None else (mark.cpu - before.cpu, mark.faults - before.faults)
        )
        last[mark.pid] = mark
    return steps


def report_calls(
    marks: list[Mark], windows: list[tuple[float, float]], options: argparse.Namespace
) -> None:
    """Per stage of a call (request to answer): the gap since the stage before, its process's
    CPU and pages since its own previous mark."""
    steps = own_steps(marks)
    gaps: defaultdict[str, list[float]] = defaultdict(list)
    cpus: defaultdict[str, list[float]] = defaultdict(list)
    pages: defaultdict[str, list[int]] = defaultdict(list)
    order: list[str] = []
    for index, (start, end) in enumerate(windows):
        previous = start
        for mark, spent in zip(marks, steps, strict=True):
            if start <= mark.stamp <= end:
                gaps[mark.label].append(mark.stamp - previous)
                previous = mark.stamp
                if spent is not None:
                    cpus[mark.label].append(spent[0])
                    pages[mark.label].append(spent[1])
                if index == 0:
                    order.append(mark.label)
        gaps[ANSWER].append(end - previous)
    order.append(ANSWER)
    total = statistics.median(end - start for start, end in windows)
    print(f"{options.calls} calls, {options.idle_ms:g} ms idle before each; median {total:.2f} ms")
    print("median ms since the previous stage; median CPU ms and pages faulted in by the")
    print("marking process since its own previous mark; stage (calls that had it)")
    for label in order:
        values = gaps[label]
        spent_ms = f"{statistics.median(cpus[label]):6.3f}" if cpus[label] else "     -"
        faulted = f"{statistics.median(pages[label]):5.0f}" if pages[label] else "    -"
        print(f"{statistics.median(values):8.3f} {spent_ms} {faulted}  {label}  ({len(values)})")


def report_pid_1(marks: list[Mark], since: float) -> None:
    """Pid 1's own steps, the preparations between the calls included: its CPU and pages since
    its previous mark (the first, `init: named`, since its clone)."""
    cpus: defaultdict[str, list[float]] = defaultdict(list)
    pages: defaultdict[str, list[int]] = defaultdict(list)
    lives: dict[int, list[str]] = {}
    order: list[str] = []
    for mark, spent in zip(marks, own_steps(marks), strict=True):
        if not mark.label.startswith("init: "):
            continue
        if mark.label == "init: named":
            lives.pop(mark.pid, None)
            if mark.stamp >= since:
                lives[mark.pid] = []
        if mark.stamp < since:
            continue
        # A process's first mark counts from its start: pid 1's clone.
        cpu, faults = spent if spent is not None else (mark.cpu, mark.faults)
        cpus[mark.label].append(cpu)
        pages[mark.label].append(faults)
        life = lives.get(mark.pid)
        if life is not None:
            life.append(mark.label)
            if mark.label == "init: exit" and not order:
                order = life  # the steps in the order of the first whole life
    print("\npid 1 step by step, every pid 1 of the measured calls (preparations included):")
    print("median CPU ms and pages faulted in since its previous mark (the first since its clone)")
    order += [label for label in cpus if label not in order]
    for label in order:
        print(
            f"         {statistics.median(cpus[label]):6.3f} {statistics.median(pages[label]):5.0f}"
            f"  {label}  ({len(cpus[label])})"
        )


def report_timeline(marks: list[Mark], windows: list[tuple[float, float]], anchor: str) -> None:
    """Each stage's first mark in a call, relative to the same call's `anchor`: medians."""
    since: defaultdict[str, list[float]] = defaultdict(list)
    for start, end in windows:
        firsts: dict[str, float] = {}
        for mark in marks:
            if start <= mark.stamp <= end:
                firsts.setdefault(mark.label, mark.stamp)
        zero = firsts.get(anchor)
        if zero is None:
            continue
        firsts[ANSWER] = end
        for label, stamp in firsts.items():
            since[label].append(stamp - zero)
    print(f"\nthe calls as one timeline: median ms of each stage's first mark since {anchor!r}")
    if not since:
        print(f"  no measured call had a stage {anchor!r}")
        return
    for middle, label in sorted((statistics.median(v), label) for label, v in since.items()):
        print(f"{middle:8.3f}  {label}  ({len(since[label])})")


if __name__ == "__main__":
    sys.exit(main())
