"""Envelope overhead: bare `bun test` vs a persistent `jigcmd serve` vs bubblewrap, on the example.

In one run, alternating between the modes (the order rotates every round):

  bare    the same Bun binary and argv, an empty environment, a copy of the passing example
  jigcmd  a `capability/call` to a persistent `jigcmd serve` child over stdio (Flow Run/1);
          latency from writing the request to reading the response line
  bwrap   bubblewrap with the same namespaces (user, pid, mount, ipc, uts, cgroup, net) and
          an equivalent minimal root, when `bwrap` is installed (it has no resource limits)

each `--runs` times back-to-back and again with `--idle-ms` of idle before every run; then
throughput at 1/2/4 concurrent sessions (each its own `jigcmd serve` child) against bare at
1/2/4 workers, and CPU per run (machine-wide busy time from /proc/stat over a sequential
phase, so it counts every process and the kernel's namespace work; the machine is shared,
so treat it as an upper bound).

Run as root (the envelope needs it): python scripts/bench_envelope.py [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

import jigcmd
from jigcmd.command.runtime import BUN_TARGET, find_runtime
from jigcmd.policy.planner import BUN_FLAGS

EXAMPLE = Path(jigcmd.__file__).parent / "example"
BINDING = EXAMPLE / "binding.toml"
PASSING = EXAMPLE / "candidates" / "passing"
TEST_ARGV = ("test", *BUN_FLAGS, "./test/project.test.ts")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def candidate_files() -> dict[str, str]:
    return {
        path.relative_to(PASSING).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(PASSING.rglob("*"))
        if path.is_file()
    }


class Bare:
    """`bun test` on a copy of the example, same binary and argv, empty environment."""

    name = "bare"

    def __init__(self, bun: str, workdir: Path) -> None:
        self.bun = bun
        self.workdir = workdir / "bare"
        shutil.copytree(PASSING, self.workdir)

    def run(self) -> float:
        started = time.perf_counter()
        done = subprocess.run(
            [self.bun, *TEST_ARGV],
            cwd=self.workdir,
            env={},
            capture_output=True,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"bare bun test failed ({done.returncode}): {done.stderr[-500:]!r}")
        return elapsed


class Bwrap:
    """bubblewrap with the envelope's namespaces and an equivalent read-only minimal root."""

    name = "bwrap"

    def __init__(self, bwrap: str, workdir: Path) -> None:
        runtime = find_runtime()
        self.workdir = workdir / "bwrap"
        shutil.copytree(PASSING, self.workdir)
        argv = [
            bwrap,
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup",
            "--unshare-net",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            "--setenv",
            "BUN_RUNTIME_TRANSPILER_CACHE_PATH",
            "0",
        ]
        for bind in runtime.binds:
            argv += ["--ro-bind", bind.source, bind.target]
        argv += [
            "--ro-bind",
            str(self.workdir),
            "/work",
            "--tmpfs",
            "/tmp",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--chdir",
            "/work",
            BUN_TARGET,
            *TEST_ARGV,
        ]
        self.argv = argv

    def run(self) -> float:
        started = time.perf_counter()
        done = subprocess.run(self.argv, capture_output=True, stdin=subprocess.DEVNULL, check=False)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"bwrap bun test failed ({done.returncode}): {done.stderr[-500:]!r}")
        return elapsed


def admit(lock: Path, *, binding: Path = BINDING, cwd: Path | None = None) -> None:
    """`jigcmd lock` the example Binding into `lock` (with the package found from `cwd`)."""
    subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--binding", str(binding), "--lock", str(lock)],
        check=True,
        capture_output=True,
        cwd=cwd,
    )


class Serve:
    """One persistent `jigcmd serve` child; each run is one Flow `capability/call`.

    Also used by scripts/trace_stages.py and scripts/bench_revisions.py: `cwd` picks the
    checkout whose package `python -m jigcmd` imports, `env` and `stderr` what the child gets.
    With `mcp`, each run is one MCP `tools/call` of a handshake-era session instead.
    """

    name = "jigcmd"

    def __init__(
        self,
        lock: Path,
        state: Path,
        *,
        binding: Path = BINDING,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        stderr: IO[bytes] | int = subprocess.DEVNULL,
        extra_args: Sequence[str] = (),
        mcp: bool = False,
    ) -> None:
        self.mcp = mcp
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jigcmd",
                "serve",
                "--binding",
                str(binding),
                "--lock",
                str(lock),
                "--state-dir",
                str(state),
                "--protocol",
                "mcp" if mcp else "flow",
                *extra_args,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            env=env,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin = self.process.stdin
        self.stdout = self.process.stdout
        self.input = {"command": "tests", "files": candidate_files()}
        self.count = 0
        if mcp:
            self._exchange(
                {
                    "jsonrpc": "2.0",
                    "id": "init",
                    "method": "initialize",
                    "params": {"protocolVersion": "2025-11-25", "capabilities": {}},
                }
            )

    def _exchange(self, message: object) -> dict[str, Any]:
        self.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        self.stdin.flush()
        line = self.stdout.readline()
        return json.loads(line) if line else {"error": "serve closed stdout"}

    def _run_mcp(self) -> float:
        call = {
            "jsonrpc": "2.0",
            "id": self.count,
            "method": "tools/call",
            "params": {"name": "tests", "arguments": {"files": self.input["files"]}},
        }
        started = time.perf_counter()
        answer = self._exchange(call)
        elapsed = time.perf_counter() - started
        evidence = answer.get("result", {}).get("structuredContent") or {}
        if evidence.get("exitCode") != 0:
            raise SystemExit(f"jigcmd serve call failed: {answer}")
        return elapsed

    def run(self) -> float:
        self.count += 1
        if self.mcp:
            return self._run_mcp()
        call = {
            "jsonrpc": "2.0",
            "id": f"b{self.count}",
            "method": "capability/call",
            "params": {
                "operationId": f"bench-{uuid.uuid4().hex}",
                "slot": "command",
                "method": "run",
                "input": self.input,
            },
        }
        frame = json.dumps(call, separators=(",", ":")).encode() + b"\n"
        started = time.perf_counter()
        self.stdin.write(frame)
        self.stdin.flush()
        line = self.stdout.readline()
        elapsed = time.perf_counter() - started
        answer: dict[str, Any] = json.loads(line) if line else {"error": "serve closed stdout"}
        value = answer.get("result", {}).get("value")
        if value is None or value.get("exitCode") != 0:
            raise SystemExit(f"jigcmd serve call failed: {answer}")
        return elapsed

    def close(self) -> None:
        self.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.stdout.close()


class Mode(Protocol):
    """Something that runs `bun test` on the example once and says how long it took."""

    @property
    def name(self) -> str: ...

    def run(self) -> float: ...


M = TypeVar("M", bound=Mode)


def busy_seconds() -> float:
    """Machine-wide CPU time spent not idle, from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def rotated(modes: Sequence[M], round_: int) -> list[M]:
    """The modes starting at another one each round, so that no mode always follows another."""
    shift = round_ % len(modes)
    return [*modes[shift:], *modes[:shift]]


def latencies(
    modes: Sequence[Mode], runs: int, idle: float, block: int = 1
) -> dict[str, list[float]]:
    """Each mode's run times in ms: `runs` rounds, the modes in rotating order in each, every
    mode `block` runs in a row (with `idle` before each run) before the next mode's turn."""
    results: dict[str, list[float]] = {mode.name: [] for mode in modes}
    for round_ in range(runs):
        for mode in rotated(modes, round_):
            for _ in range(block):
                if idle:
                    time.sleep(idle)
                results[mode.name].append(mode.run() * 1000)
    return results


def throughput(make: Callable[[], Mode], workers: int, per_worker: int) -> float:
    """Runs per second with `workers` sessions each running `per_worker` runs back-to-back."""
    return under_load(make, workers, per_worker)[0]


def under_load(
    make: Callable[[], Mode], workers: int, per_worker: int, settle: float = 0.0
) -> tuple[float, float]:
    """`throughput`, and the machine's busy CPU ms per run meanwhile (the timed runs only).

    With `settle`, the CPU is counted as `bench_floor.cpu_rounds` counts a rung alone: the
    machine's background over an idle spell of `settle` seconds before the runs is taken
    out, and the count goes on for `settle` seconds after them, so that the kernel's
    deferred work (a network namespace's teardown) is the runs' own. The rate is the timed
    runs' either way.
    """
    sessions = [make() for _ in range(workers)]
    try:
        for session in sessions:
            session.run()  # warm-up, not counted
        background = 0.0
        if settle > 0:
            before, idle_from = busy_seconds(), time.perf_counter()
            time.sleep(settle)
            background = (busy_seconds() - before) / (time.perf_counter() - idle_from)
        barrier = threading.Barrier(workers + 1)

        def work(session: Mode) -> None:
            barrier.wait()
            for _ in range(per_worker):
                session.run()

        threads = [threading.Thread(target=work, args=(s,)) for s in sessions]
        for thread in threads:
            thread.start()
        barrier.wait()
        started, busy = time.perf_counter(), busy_seconds()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        time.sleep(settle)
        counted = time.perf_counter() - started
        busy = busy_seconds() - busy - background * counted
        runs = workers * per_worker
        return runs / elapsed, busy / runs * 1000
    finally:
        for session in sessions:
            if isinstance(session, Serve):
                session.close()


def cpu_per_run(mode: Mode, runs: int) -> float:
    before = busy_seconds()
    for _ in range(runs):
        mode.run()
    return (busy_seconds() - before) / runs * 1000


def table(rows: list[list[str]], text_columns: int = 1) -> str:
    """Rows as aligned columns: the first `text_columns` left, numbers right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if i < text_columns else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs per mode and phase")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured runs per mode first")
    parser.add_argument("--idle-ms", type=float, default=100.0, help="idle before each run")
    parser.add_argument("--throughput-runs", type=int, default=10, help="runs per worker")
    parser.add_argument("--concurrency", default="1,2,4", help="worker/session counts")
    parser.add_argument("--cpu-runs", type=int, default=20, help="runs per mode for CPU")
    parser.add_argument("--no-bwrap", action="store_true", help="skip bubblewrap")
    args = parser.parse_args()

    runtime = find_runtime()
    print(
        f"machine: {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), "
        f"{platform.system()} {platform.release()} {platform.machine()}, "
        f"Python {platform.python_version()}, Bun {runtime.version} at {runtime.path}"
    )
    with tempfile.TemporaryDirectory(prefix="jigcmd-bench-") as tmp:
        workdir = Path(tmp)
        lock = workdir / "jigcmd.lock"
        admit(lock)
        state = workdir / "state"
        bare = Bare(runtime.path, workdir)
        serve = Serve(lock, state)
        modes: list[Mode] = [bare, serve]
        bwrap = None if args.no_bwrap else shutil.which("bwrap")
        if bwrap:
            modes.append(Bwrap(bwrap, workdir))
        else:
            print("bwrap: not installed (or --no-bwrap); apt-get install bubblewrap to compare")
        try:
            for mode in modes:
                for _ in range(args.warmup):
                    mode.run()
            rows = [["mode", "phase", "n", "median ms", "p95 ms", "over bare ms", "ratio"]]
            for phase, idle in (
                ("back-to-back", 0.0),
                (f"idle {args.idle_ms:g} ms", args.idle_ms / 1000),
            ):
                results = latencies(modes, args.runs, idle)
                base = statistics.median(results["bare"])
                for mode in modes:
                    values = results[mode.name]
                    median = statistics.median(values)
                    rows.append(
                        [
                            mode.name,
                            phase,
                            str(len(values)),
                            f"{median:.1f}",
                            f"{percentile(values, 0.95):.1f}",
                            f"{median - base:+.1f}",
                            f"{median / base:.2f}x",
                        ]
                    )
            print("\nlatency (client side, spawn or request to exit or response)")
            print(table(rows, text_columns=2))

            print(f"\nCPU per run (machine-wide busy time, {args.cpu_runs} sequential runs)")
            cpu_rows = [["mode", "cpu ms/run", "ratio"]]
            cpu = {mode.name: cpu_per_run(mode, args.cpu_runs) for mode in modes}
            for name, value in cpu.items():
                cpu_rows.append([name, f"{value:.1f}", f"{value / cpu['bare']:.2f}x"])
            print(table(cpu_rows))
        finally:
            serve.close()

        counts = [int(c) for c in args.concurrency.split(",")]
        print(f"\nthroughput (runs/s; {args.throughput_runs} runs per worker or session)")
        tp_rows = [["workers", "bare", "jigcmd (own serve each)", "ratio"]]
        for count in counts:
            bare_rate = throughput(lambda: bare, count, args.throughput_runs)
            serve_rate = throughput(lambda: Serve(lock, state), count, args.throughput_runs)
            tp_rows.append(
                [
                    str(count),
                    f"{bare_rate:.1f}",
                    f"{serve_rate:.1f}",
                    f"{serve_rate / bare_rate:.2f}x",
                ]
            )
        print(table(tp_rows))


if __name__ == "__main__":
    main()
