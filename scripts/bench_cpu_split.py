"""Where a call's CPU goes, by process: the server, the zygote, the rest, the envelope.

A persistent `jigcmd serve` (the working tree) runs in a cgroup of its own and puts its
envelopes' jobs under a cgroup base of their own (`--cgroup-base`), so that each side is
counted apart by the kernel's own accounting, whatever else runs on the machine:

  server      the server process, all its threads (`/proc/PID/stat`, in clock ticks)
  zygote      the zygote process (likewise)
  spawner     the process the zygote forks once to clone each pid 1 (spawner.py; likewise),
              0 where there is none
  supervisors everything else in the server's cgroup: since the zygote supervises every
              envelope (issue #26) only each pid 1's first steps, before it joins its job's
              v1 hierarchies (its fork return, its first page faults); before that, each
              envelope's supervisor process too
  envelope    everything in the envelopes' jobs: pid 1 and Bun (the job's CPU accounting)
  bare bun    the same `bun test` run bare, for comparison (its rusage)

Each call has `--idle-ms` of idle before it. Needs root and the v1 cpuacct controller (a
hybrid host like the development machine) or cgroup v2.

Run as root: python scripts/bench_cpu_split.py [--calls 60] [--idle-ms 100]
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
    """A cgroup's CPU time in nanoseconds, v1 cpuacct or v2."""

    def __init__(self, name: str) -> None:
        v1 = Path("/sys/fs/cgroup/cpuacct")
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60, help="measured calls")
    parser.add_argument("--idle-ms", type=float, default=100.0, help="idle before each call")
    args = parser.parse_args()
    idle = args.idle_ms / 1000
    tag = secrets.token_hex(4)
    server_group = Accounting(f"jigcmd-bench-server-{tag}")
    jobs_base = f"jigcmd-bench-jobs-{tag}"
    server_group.dir.mkdir()
    work = Path(tempfile.mkdtemp(prefix="jigcmd-cpu-split-"))
    serve: Serve | None = None
    try:
        lock = work / "jigcmd.lock"
        admit(lock)
        # The server is born in its cgroup: this process moves there, starts it, moves back.
        procs = server_group.dir / "cgroup.procs"
        home = server_group.dir.parent / "cgroup.procs"
        procs.write_text(str(os.getpid()))
        try:
            serve = Serve(lock, work / "state", extra_args=("--cgroup-base", jobs_base))
        finally:
            home.write_text(str(os.getpid()))
        for _ in range(WARMUP):
            serve.run()
        jobs = Accounting(jobs_base)
        server = serve.process.pid
        zygote = zygote_of(server)
        spawner = spawner_of(zygote)

        def sample() -> tuple[int, ...]:
            return (
                server_group.used_ns(),
                jobs.used_ns(),
                on_cpu_ns(server),
                on_cpu_ns(zygote),
                on_cpu_ns(spawner),
                run_ns(zygote),
                run_ns(spawner),
                minor_faults(zygote),
                minor_faults(spawner),
            )

        before = sample()
        for _ in range(args.calls):
            time.sleep(idle)
            serve.run()
        # The last call's cleanup ends before its answer; idle so the pool's refill counts too.
        time.sleep(0.5)
        after = sample()
        (
            outside,
            envelope,
            server_ns,
            zygote_ns,
            spawner_ns,
            zygote_run,
            spawner_run,
            zygote_faults,
            spawner_faults,
        ) = (b - a for a, b in zip(before, after, strict=True))
        bare = bare_cpu_ms(find_runtime().path, work, PASSING, args.calls, idle)
    finally:
        if serve is not None:
            serve.close()
        for group in (server_group.dir, *Path("/sys/fs/cgroup").glob(f"*/{jobs_base}")):
            with contextlib.suppress(OSError):
                group.rmdir()
        shutil.rmtree(work, ignore_errors=True)
    per_call = {
        "server": server_ns,
        "zygote": zygote_ns,
        "spawner": spawner_ns,
        "supervisors": outside - server_ns - zygote_ns - spawner_ns,
        "envelope (pid 1 + Bun)": envelope,
    }
    print(f"{args.calls} calls, {args.idle_ms:.0f} ms idle before each; CPU ms per call")
    total = 0.0
    for role, ns in per_call.items():
        ms = ns / args.calls / 1e6
        total += ms
        print(f"  {role:<24}{ms:8.2f}")
    print(f"  {'total':<24}{total:8.2f}")
    print(f"  {'bare bun test':<24}{bare:8.2f}")
    print(f"  {'total over bare':<24}{total - bare:8.2f}")
    print(
        f"  by schedstat: zygote {zygote_run / args.calls / 1e6:.2f} ms,"
        f" spawner {spawner_run / args.calls / 1e6:.2f} ms"
    )
    print(
        f"  minor faults per call: zygote {zygote_faults / args.calls:.1f},"
        f" spawner {spawner_faults / args.calls:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
