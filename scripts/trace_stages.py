"""Where one call's time goes: the median gap before each traced stage, over many calls.

Starts one `jigcmd serve` with `JIGCMD_TRACE=1` (every process of the envelope writes
`jigcmd-trace <monotonic ms> <pid> <cpu ms> <label>` to stderr, see `jigcmd/trace.py`), sends
`bun test` calls on the bundled example with `--idle-ms` of idle before each, and prints, per
stage in the order of the first call, the median time since the previous stage, and the median
CPU the marking process spent since its own previous mark (the envelope's processes mark where
they block until a request, "... waiting", so their first stage counts only the run's work;
the server's "readable" also counts what it did after the previous answer). Tracing itself
costs a little at every mark; compare runs of this script, not its totals with the benchmark's.

Run as root: python scripts/trace_stages.py [--calls 30] [--idle-ms 100]
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

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout: the sibling benchmark (and the package) must be importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench_envelope import Serve, admit  # noqa: E402 - needs the path set up above

WARMUP = 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30, help="measured calls")
    parser.add_argument("--idle-ms", type=float, default=100.0, help="idle before each call")
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
    marks = sorted(
        (float(fields[1]), int(fields[2]), float(fields[3]), fields[4])
        for line in log_text.splitlines()
        if line.startswith("jigcmd-trace ") and len(fields := line.split(None, 4)) == 5
    )
    # The CPU each mark's process spent since its own previous mark, inside a call or not.
    cpu_since: list[float | None] = []
    last_cpu: dict[int, float] = {}
    for _stamp, pid, cpu, _label in marks:
        cpu_since.append(cpu - last_cpu[pid] if pid in last_cpu else None)
        last_cpu[pid] = cpu
    gaps: defaultdict[str, list[float]] = defaultdict(list)
    cpus: defaultdict[str, list[float]] = defaultdict(list)
    order: list[str] = []
    for index, (start, end) in enumerate(windows):
        previous = start
        for (stamp, _pid, _cpu, label), spent in zip(marks, cpu_since, strict=True):
            if start <= stamp <= end:
                gaps[label].append(stamp - previous)
                previous = stamp
                if spent is not None:
                    cpus[label].append(spent)
                if index == 0:
                    order.append(label)
        gaps["(answer read by the client)"].append(end - previous)
    order.append("(answer read by the client)")
    total = statistics.median(end - start for start, end in windows)
    print(f"{options.calls} calls, {options.idle_ms:g} ms idle before each; median {total:.2f} ms")
    print("median ms since the previous stage, median CPU ms of the marking process since its")
    print("previous mark, stage (calls that had it)")
    for label in order:
        values = gaps[label]
        spent_ms = f"{statistics.median(cpus[label]):6.3f}" if cpus[label] else "     -"
        print(f"{statistics.median(values):8.3f} {spent_ms}  {label}  ({len(values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
