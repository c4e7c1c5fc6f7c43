"""Where a call's CPU goes, by process: the server, the zygote, the rest, the envelope.

A persistent `jigcmd serve` (the working tree) runs in a cgroup of its own and puts its
envelopes' jobs under a cgroup base of their own (`--cgroup-base`), so that each side is
counted apart by the kernel's own accounting, whatever else runs on the machine:

  server      the server process, all its threads (`/proc/PID/stat`, in clock ticks)
  zygote      the zygote process (likewise)
  spawner     the process the zygote forks once to clone each pid 1 (spawner.py; likewise),
              0 where there is none
  supervisors everything else in the server's cgroup: ~0 since each pid 1 is born in its
              job's cgroup2 directory (`CLONE_INTO_CGROUP`); on a pure v1 host each pid 1's
              first steps, before it joins its job's hierarchies
  envelope    everything in the envelopes' jobs: pid 1 and Bun (the job's CPU accounting)
  bare bun    the same `bun test` run bare, for comparison (its rusage)

Each call has `--idle-ms` of idle before it. Needs root and cgroup v2, or v1's cpuacct
controller; on a hybrid host like the development machine both sides are counted in its
unified (cgroup2) hierarchy, as on v2 (until 2026-12-05 in cpuacct: there "supervisors" held
pid 1's steps before its v1 join, ~0.7 ms, which "envelope" now holds).

With `--sessions N` (N > 1) it measures throughput's question instead: N servers sharing one
state directory (one journal, one slot queue, as sessions on one host do), each calling back
to back from a thread of its own, against one of them calling alone, in alternating
`--rounds`; each column is summed over the N trees and divided by the calls, and printed beside
its alone figure with the ratio. What grows under load is what caps throughput beyond the CPU
ratio (`bench_floor.py`'s "CPU per run at 4 workers over the same rung's alone").

Run as root: python scripts/bench_cpu_split.py [--calls 60] [--idle-ms 100]
             python scripts/bench_cpu_split.py --sessions 4 [--calls 120] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout: the sibling benchmark must be importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jigcmd.command.runtime import find_runtime  # noqa: E402 - needs the path set up above
from scripts.bench_envelope import PASSING, TEST_ARGV, Serve, admit  # noqa: E402 - likewise

WARMUP = 3


class Accounting:
    """A cgroup's CPU time in nanoseconds: a cgroup2 `cpu.stat`, or v1 cpuacct.

    On a hybrid host the unified hierarchy's: jigcmd's jobs have no cpuacct directory there,
    and a parent's `cpu.stat` keeps its removed children's time.
    """

    def __init__(self, name: str) -> None:
        v1 = Path("/sys/fs/cgroup/cpuacct")
        hybrid = Path("/sys/fs/cgroup/unified")
        if (hybrid / "cgroup.procs").exists():
            self.v1, self.dir = False, hybrid / name
        else:
            self.v1 = v1.is_dir()
            self.dir = (v1 if self.v1 else Path("/sys/fs/cgroup")) / name

    def used_ns(self) -> int:
        if self.v1:
            return int((self.dir / "cpuacct.usage").read_text())
        for line in (self.dir / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) * 1000
        raise OSError(f"no usage_usec in {self.dir}/cpu.stat")


def on_cpu_ns(pid: int | None) -> int:
    """Process `pid`'s CPU time, every thread's, living or gone (clock ticks, as ns)."""
    if pid is None:
        return 0
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    fields = stat[stat.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def run_ns(pid: int | None) -> int:
    """Single-threaded `pid`'s time on a CPU in nanoseconds (`schedstat`: not in ticks)."""
    if pid is None:
        return 0
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def minor_faults(pid: int | None) -> int:
    """Process `pid`'s minor page faults so far (its copy-on-write faults among them)."""
    if pid is None:
        return 0
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rindex(b")") + 2 :].split()[7])


def spawner_of(zygote: int) -> int | None:
    """The zygote's spawner (its child named `jigcmd-spawner`), or None."""
    with contextlib.suppress(OSError):
        children = Path(f"/proc/{zygote}/task/{zygote}/children").read_text().split()
        for child in children:
            with contextlib.suppress(OSError):
                if Path(f"/proc/{child}/comm").read_text().strip() == "jigcmd-spawner":
                    return int(child)
    return None


def zygote_of(server: int) -> int:
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{name}/stat").read_bytes()
                if int(stat[stat.rindex(b")") + 2 :].split()[1]) == server:
                    return int(name)
    raise SystemExit("the server has no zygote")


def bare_cpu_ms(bun: str, work: Path, project: Path, calls: int, idle: float) -> float:
    """Bare Bun's CPU per run (its rusage), on a copy of the project."""
    workdir = work / "bare"
    shutil.copytree(project, workdir)
    total = 0.0
    for _ in range(calls):
        time.sleep(idle)
        child = subprocess.Popen(
            [bun, *TEST_ARGV],
            cwd=workdir,
            env={},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _pid, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            raise SystemExit(f"bare bun test failed ({child.returncode})")
        total += (usage.ru_utime + usage.ru_stime) * 1000
    return total / calls


class Tree:
    """One `jigcmd serve` and its zygote and spawner, as the kernel counts them."""

    def __init__(self, serve: Serve) -> None:
        self.serve = serve
        self.server = serve.process.pid
        self.zygote = zygote_of(self.server)
        self.spawner = spawner_of(self.zygote)

    def sample(self) -> dict[str, int]:
        return {
            "server": on_cpu_ns(self.server),
            "zygote": on_cpu_ns(self.zygote),
            "spawner": on_cpu_ns(self.spawner),
            "zygote_run": run_ns(self.zygote),
            "spawner_run": run_ns(self.spawner),
            "zygote_faults": minor_faults(self.zygote),
            "spawner_faults": minor_faults(self.spawner),
        }


class Bench:
    """Servers in one cgroup, their envelopes' jobs under one base, counted per call."""

    def __init__(self, server_group: Accounting, jobs: Accounting, trees: list[Tree]) -> None:
        self.server_group = server_group
        self.jobs = jobs
        self.trees = trees

    def sample(self, trees: list[Tree]) -> dict[str, int]:
        totals = {"outside": self.server_group.used_ns(), "envelope": self.jobs.used_ns()}
        # Every tree's processes count towards "outside": the idle ones are read too.
        for tree in self.trees:
            for key, value in tree.sample().items():
                totals[key] = totals.get(key, 0) + value
        return totals

    def calls(self, sessions: int, calls: int, idle: float) -> dict[str, float]:
        """Per call: each column over `calls` calls, `sessions` servers calling at once."""
        trees = self.trees[:sessions]
        per_session = max(1, calls // sessions)
        barrier = threading.Barrier(sessions + 1)

        def work(tree: Tree) -> None:
            barrier.wait()
            for _ in range(per_session):
                time.sleep(idle)
                tree.serve.run()

        threads = [threading.Thread(target=work, args=(tree,)) for tree in trees]
        for thread in threads:
            thread.start()
        before = self.sample(trees)
        barrier.wait()
        for thread in threads:
            thread.join()
        # The last calls' cleanup ends before their answers; idle so the refills count too.
        time.sleep(0.5)
        after = self.sample(trees)
        n = per_session * sessions
        delta = {key: (after[key] - before[key]) / n for key in before}
        return delta


def columns(delta: dict[str, float]) -> dict[str, float]:
    """The printed columns (ms per call) from one measurement's deltas (ns per call)."""
    processes = delta["server"] + delta["zygote"] + delta["spawner"]
    return {
        "server": delta["server"] / 1e6,
        "zygote": delta["zygote"] / 1e6,
        "spawner": delta["spawner"] / 1e6,
        "supervisors": (delta["outside"] - processes) / 1e6,
        "envelope (pid 1 + Bun)": delta["envelope"] / 1e6,
    }


def start(count: int, lock: Path, state: Path, server_group: Accounting, base: str) -> list[Tree]:
    """`count` servers born in `server_group`, sharing `state`, their jobs under `base`."""
    # Each server is born in the cgroup: this process moves there, starts it, moves back.
    procs = server_group.dir / "cgroup.procs"
    home = server_group.dir.parent / "cgroup.procs"
    procs.write_text(str(os.getpid()))
    serves: list[Serve] = []
    try:
        for _ in range(count):
            serves.append(Serve(lock, state, extra_args=("--cgroup-base", base)))
    finally:
        home.write_text(str(os.getpid()))
    for serve in serves:
        for _ in range(WARMUP):
            serve.run()
    return [Tree(serve) for serve in serves]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60, help="measured calls (per round)")
    parser.add_argument("--idle-ms", type=float, help="idle ms (100; 0 with --sessions)")
    parser.add_argument("--sessions", type=int, default=1, help="servers calling at once")
    parser.add_argument("--rounds", type=int, default=3, help="alone/loaded rounds (--sessions)")
    args = parser.parse_args()
    idle_ms = args.idle_ms if args.idle_ms is not None else (0.0 if args.sessions > 1 else 100.0)
    idle = idle_ms / 1000
    tag = secrets.token_hex(4)
    server_group = Accounting(f"jigcmd-bench-server-{tag}")
    jobs_base = f"jigcmd-bench-jobs-{tag}"
    server_group.dir.mkdir()
    work = Path(tempfile.mkdtemp(prefix="jigcmd-cpu-split-"))
    trees: list[Tree] = []
    try:
        lock = work / "jigcmd.lock"
        admit(lock)
        trees = start(max(1, args.sessions), lock, work / "state", server_group, jobs_base)
        bench = Bench(server_group, Accounting(jobs_base), trees)
        if args.sessions > 1:
            alone, loaded = rounds(bench, args.sessions, args.calls, idle, args.rounds)
        else:
            alone, loaded = bench.calls(1, args.calls, idle), None
        bare = bare_cpu_ms(find_runtime().path, work, PASSING, min(args.calls, 60), idle)
    finally:
        for tree in trees:
            tree.serve.close()
        for group in (server_group.dir, *Path("/sys/fs/cgroup").glob(f"*/{jobs_base}")):
            with contextlib.suppress(OSError):
                group.rmdir()
        shutil.rmtree(work, ignore_errors=True)
    if loaded is None:
        report(alone, bare, args.calls, idle_ms)
    else:
        report_loaded(
            alone,
            loaded,
            bare,
            sessions=args.sessions,
            calls=args.calls,
            idle_ms=idle_ms,
            count=args.rounds,
        )
    return 0


def rounds(
    bench: Bench, sessions: int, calls: int, idle: float, count: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Alone and with `sessions` at once, alternating, each summed over `count` rounds."""
    alone: dict[str, float] = {}
    loaded: dict[str, float] = {}
    for round_ in range(count):
        order = ((1, alone), (sessions, loaded))
        for n, into in order if round_ % 2 == 0 else reversed(order):
            for key, value in bench.calls(n, calls, idle).items():
                into[key] = into.get(key, 0.0) + value / count
    return alone, loaded


def report(delta: dict[str, float], bare: float, calls: int, idle_ms: float) -> None:
    print(f"{calls} calls, {idle_ms:.0f} ms idle before each; CPU ms per call")
    total = 0.0
    for role, ms in columns(delta).items():
        total += ms
        print(f"  {role:<24}{ms:8.2f}")
    print(f"  {'total':<24}{total:8.2f}")
    print(f"  {'bare bun test':<24}{bare:8.2f}")
    print(f"  {'total over bare':<24}{total - bare:8.2f}")
    print(
        f"  by schedstat: zygote {delta['zygote_run'] / 1e6:.2f} ms,"
        f" spawner {delta['spawner_run'] / 1e6:.2f} ms"
    )
    print(
        f"  minor faults per call: zygote {delta['zygote_faults']:.1f},"
        f" spawner {delta['spawner_faults']:.1f}"
    )


def report_loaded(
    alone: dict[str, float],
    loaded: dict[str, float],
    bare: float,
    *,
    sessions: int,
    calls: int,
    idle_ms: float,
    count: int,
) -> None:
    print(
        f"{count} rounds of {calls} calls alone and {calls} over {sessions} sessions at once"
        f" (one state directory), {idle_ms:.0f} ms idle before each; CPU ms per call"
    )
    print(f"  {'':<24}{'alone':>8}{f'{sessions} at once':>12}{'ratio':>8}")
    one, many = columns(alone), columns(loaded)
    for role in one:
        ratio = many[role] / one[role] if one[role] > 0 else float("nan")
        print(f"  {role:<24}{one[role]:8.2f}{many[role]:12.2f}{ratio:7.2f}x")
    total_one, total_many = sum(one.values()), sum(many.values())
    print(f"  {'total':<24}{total_one:8.2f}{total_many:12.2f}{total_many / total_one:7.2f}x")
    print(f"  {'bare bun test':<24}{bare:8.2f}")
    for key, label in (("zygote_run", "zygote"), ("spawner_run", "spawner")):
        print(f"  by schedstat, {label:<10}{alone[key] / 1e6:8.2f}{loaded[key] / 1e6:12.2f}")
    for key, label in (("zygote_faults", "zygote"), ("spawner_faults", "spawner")):
        print(f"  minor faults, {label:<10}{alone[key]:8.1f}{loaded[key]:12.1f}")


if __name__ == "__main__":
    sys.exit(main())
