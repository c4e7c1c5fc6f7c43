"""Bun started ahead of the request: what it would take off a call's latency, and what it costs.

A prepared envelope holds pid 1, not Bun: at the go pid 1 spawns Bun, and Bun's own start
(its exec, the runtime, the test runner) is on every call's path. This prices starting Bun
while the envelope is prepared, blocked in a `--preload` of jigcmd's until the go, against
the bare `bun test` of the passing example (the same binary, argv and posture flags; no
envelope on either side, so only Bun's share is measured). Modes, alternating each round:

  bare       spawn `bun test`, wait for its exit: the wall time and the process's CPU
  ahead      spawn Bun with the blocking preload, wait until it says it is ready, stay idle
             `--idle-ms`, then the go: the wall time from the go to its exit, the whole
             process's CPU, its PSS while it waited, and the duration Bun itself prints
  at once    the same with the go as soon as it is ready: the preload's own CPU, without
             the caches the idle time cools

Bun's printed duration ("Ran 1 test across 1 file. [N ms]") and the candidate's clocks
(`performance.now()`, `process.uptime()`) start at Bun's exec, so a Bun started ahead reports
the wait as its own time: the `printed` column shows it.

Run: python scripts/bench_bun_ahead.py [--rounds 30] [--idle-ms 100]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout: the sibling benchmark must be importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jigcmd.command.runtime import find_runtime  # noqa: E402 - after the path set up above
from scripts.bench_envelope import PASSING, TEST_ARGV, table  # noqa: E402 - after the path set up above

# Holds Bun before the test runner until one byte arrives on the go pipe, after saying it is
# ready: Bun waits for a preload's top-level await. Bun's own file API, not `node:fs`, whose
# import alone costs ~2 ms of CPU (Bun 1.4.2).
WAIT_JS = """await Bun.write(Bun.file(+process.env.JIGCMD_READY_FD), "r");
await Bun.file(+process.env.JIGCMD_GO_FD).stream().getReader().read();
"""
PRINTED = re.compile(rb"\[(\d+(?:\.\d+)?)(ms|s)\]\s*$")


class Sample(NamedTuple):
    """One run: wall ms (for `ahead`, from the go), CPU ms, PSS MiB waiting, printed ms."""

    wall: float
    cpu: float
    pss: float | None
    printed: float | None


def children_cpu() -> float:
    """CPU seconds of every reaped child so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def printed_ms(stderr: bytes) -> float | None:
    """The duration `bun test` prints last, in ms."""
    found = PRINTED.search(stderr)
    if found is None:
        return None
    value = float(found.group(1))
    return value * 1000 if found.group(2) == b"s" else value


def pss_mib(pid: int) -> float:
    """The process's PSS from `smaps_rollup`."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no Pss line for {pid}")


def spawned(argv: list[str], workdir: Path) -> Sample:
    """Run `argv` to its end."""
    before, start = children_cpu(), time.perf_counter()
    done = subprocess.run(argv, cwd=workdir, capture_output=True, check=True)
    wall = time.perf_counter() - start
    return Sample(wall * 1e3, (children_cpu() - before) * 1e3, None, printed_ms(done.stderr))


def ahead(argv: list[str], workdir: Path, idle_s: float) -> Sample:
    """Start Bun blocked in the preload, idle, then the go; time from the go."""
    go_read, go_write = os.pipe()
    ready_read, ready_write = os.pipe()
    before = children_cpu()
    env = {"JIGCMD_GO_FD": str(go_read), "JIGCMD_READY_FD": str(ready_write)}
    child = subprocess.Popen(
        argv, cwd=workdir, env=env, pass_fds=(go_read, ready_write),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(go_read)
    os.close(ready_write)
    if os.read(ready_read, 1) != b"r":
        raise RuntimeError("Bun ended before its preload said it was ready")
    os.close(ready_read)
    time.sleep(idle_s)
    pss = pss_mib(child.pid)
    start = time.perf_counter()
    os.write(go_write, b"g")
    _, stderr = child.communicate()
    wall = time.perf_counter() - start
    os.close(go_write)
    if child.returncode != 0:
        raise RuntimeError(f"bun test failed: {stderr.decode(errors='replace')}")
    return Sample(wall * 1e3, (children_cpu() - before) * 1e3, pss, printed_ms(stderr))


def median(values: list[float | None]) -> str:
    """The median of the values present, or a dash."""
    present = [value for value in values if value is not None]
    return f"{statistics.median(present):.2f}" if present else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--idle-ms", type=float, default=100.0)
    args = parser.parse_args()
    bun = str(find_runtime().path)
    with tempfile.TemporaryDirectory(prefix="jigcmd-bench-") as scratch:
        workdir = Path(scratch) / "project"
        shutil.copytree(PASSING, workdir)
        wait_js = Path(scratch) / "wait.mjs"
        wait_js.write_text(WAIT_JS)
        test, rest = TEST_ARGV[0], list(TEST_ARGV[1:])
        preloaded = [bun, test, "--preload", str(wait_js), *rest]
        gap = args.idle_ms / 1000
        rows: dict[str, list[Sample]] = {"bare": [], "ahead": [], "at once": []}
        for _ in range(args.rounds):
            time.sleep(gap)
            rows["bare"].append(spawned([bun, test, *rest], workdir))
            rows["ahead"].append(ahead(preloaded, workdir, gap))
            rows["at once"].append(ahead(preloaded, workdir, 0.0))
    header = ["mode", "wall ms", "cpu ms", "PSS MiB waiting", "printed ms"]
    body = [
        [name, median([s.wall for s in got]), median([s.cpu for s in got]),
         median([s.pss for s in got]), median([s.printed for s in got])]
        for name, got in rows.items()
    ]  # fmt: skip
    print(f"{args.rounds} rounds, {args.idle_ms:.0f} ms idle before each run and before each go")
    print(table([header, *body]))
    bare, started = rows["bare"], rows["ahead"]
    wall = statistics.median(s.wall for s in started) - statistics.median(s.wall for s in bare)
    cpu = statistics.median(s.cpu for s in started) - statistics.median(s.cpu for s in bare)
    print(f"Bun started ahead: {wall:+.2f} ms from the go to its end, {cpu:+.2f} ms of CPU a run.")


if __name__ == "__main__":
    main()
