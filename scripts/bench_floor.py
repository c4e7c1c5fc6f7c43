"""The envelope's floor: bare `bun test`, then C tools adding the envelope's pieces rung by rung.

Issue #6 asks for the complete envelope within 2 ms of bare Bun and 4 sessions at 0.8x bare
throughput, or for the measured floor where a target is out of reach. Here no Python runs in
any envelope: util-linux `unshare` and bubblewrap (C) build the namespaces, the root and the
seccomp filter; the benchmark's own thread does the cgroup work, one system call per step.
Each rung adds one piece to the one before, so neighbours differ by what that piece costs:

  bare      the same Bun binary and argv, an empty environment (as scripts/bench_envelope.py)
  exec      one extra exec of a small C program in front of Bun (`env`): about what a tool's
            own start costs, the tool's share rather than the envelope's
  user+mnt  `unshare`: a user namespace (root mapped) and a mount namespace made private
  +pid..    + pid (unshare forks; Bun is the namespace's pid 1), ipc, uts and cgroup
            namespaces, and a fresh /proc
  +net      + a network namespace
  bwrap     bubblewrap with the same namespaces, the host's root bound in (its own cost)
  +root     the minimal read-only root instead (the runtime's binds, the project, a tmpfs
            /tmp, /proc, /dev), as in bench_envelope's bwrap mode
  +seccomp  + jigcmd's own seccomp filter (`--seccomp`)
  +cgroups  + a fresh cgroup job per run in the v1 hierarchies jigcmd limits with (memory,
            pids, cpu) and a unified directory: created, limited as jigcmd limits, joined (the
            spawning thread moves itself through `tasks`, so bwrap is born inside), read for
            its accounting (the unified `cpu.stat`, as jigcmd's hybrid job since 2026-12-05;
            cpuacct before), confirmed empty, removed. Needs the v1 controllers (a hybrid host
            like this one).
  prepared  all of +cgroups made before the request, `sh` waiting in the finished envelope:
            timed from the go (one line on stdin; `sh` execs Bun) to the job's removal. The
            on-path floor of a prepared envelope, the shape jigcmd has.
  jigcmd    a `capability/call` to a persistent `jigcmd serve` (the complete envelope, with
            the protocol and the durable journal)
  jigcmd/tmpfs  with `--journal-on-tmpfs`: the same, its state directory (the journal) on
            tmpfs (`/dev/shm`), where an fsync costs nothing: how much of jigcmd's figures is
            the disk's flush (two fsynced commits per call: the row before the candidate
            may start, the evidence before the answer)

For each: latency median with `--idle-ms` of idle before each run; back to back, `--block`
runs in a row of one rung before the next rung's turn (one caller calling again as soon as
it has its answer: for jigcmd, whatever its background work costs the next call shows), and
with no idle but the rungs rotating run by run (each run follows ten other rungs' runs, as
before 2026-12-04: the column "no idle, rotated"); CPU per run (machine-wide
busy time from /proc/stat, in rotating rounds that each end idle, so that the kernel's
deferred work, such as a network namespace's teardown, counts for the rung that caused it;
the idle machine's background is subtracted; jigcmd's and prepared's ratio to `+cgroups` is
also printed round by round, each round's rungs being neighbours in time); throughput with
`--workers` concurrent workers (or `jigcmd serve` sessions), in rotating rounds, reported as
the median of the per-round ratios to bare, with the CPU per run meanwhile counted as alone
(background out, the settle in). All in one run.

Run as root: python scripts/bench_floor.py [--runs 40] [--cpu-runs 300] [--rounds 6]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout: the sibling benchmark (and the package) must be importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jigcmd.command.runtime import BUN_TARGET, find_runtime  # noqa: E402 - needs the path set up above
from jigcmd.envelope.seccomp import build_filter  # noqa: E402 - needs the path set up above
from jigcmd.plan import Limits  # noqa: E402 - needs the path set up above
from scripts.bench_envelope import (  # noqa: E402 - needs the path set up above
    PASSING,
    TEST_ARGV,
    Bare,
    Serve,
    admit,
    busy_seconds,
    latencies,
    percentile,
    rotated,
    table,
    under_load,
)

V1_CONTROLLERS = ("memory", "pids", "cpu")
# tmpfs, for the journal of the `jigcmd/tmpfs` rung (an fsync there writes nothing).
SHM = "/dev/shm"
TMPFS_RUNG = "jigcmd/tmpfs"
CGROUP_ROOT = "/sys/fs/cgroup"


class Command:
    """One rung: an argv spawned like bare's (`subprocess.run`, output captured)."""

    def __init__(self, name: str, argv: Sequence[str], cwd: Path | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.cwd = cwd

    def spawn(self) -> None:
        self._spawn(self.argv, ())

    def _spawn(self, argv: Sequence[str], pass_fds: tuple[int, ...]) -> None:
        done = subprocess.run(
            argv,
            cwd=self.cwd,
            env={},
            capture_output=True,
            stdin=subprocess.DEVNULL,
            pass_fds=pass_fds,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{self.name} failed ({done.returncode}): {done.stderr[-800:]!r}")

    def run(self) -> float:
        started = time.perf_counter()
        self.spawn()
        return time.perf_counter() - started


class Seccomp(Command):
    """bwrap with jigcmd's filter loaded from a file descriptor opened per run."""

    def __init__(self, name: str, argv: Sequence[str], program: Path) -> None:
        super().__init__(name, argv)
        self.program = program

    @contextlib.contextmanager
    def loaded(self) -> Iterator[tuple[list[str], int]]:
        """The argv with `--seccomp FD`, and FD: the filter opened for one run."""
        fd = os.open(self.program, os.O_RDONLY | os.O_CLOEXEC)
        try:
            yield [*self.argv[:1], "--seccomp", str(fd), *self.argv[1:]], fd
        finally:
            os.close(fd)

    def spawn(self) -> None:
        with self.loaded() as (argv, fd):
            self._spawn(argv, (fd,))


class Job:
    """One fresh cgroup job in jigcmd's v1 hierarchies and a unified directory, raw syscalls."""

    numbers = itertools.count()

    def __init__(self, hierarchies: dict[str, str]) -> None:
        self.hierarchies = hierarchies  # controller -> mount point
        self.name = f"jigcmd-floor-{os.getpid()}-{next(self.numbers)}"
        self.dirs = {c: os.path.join(m, self.name) for c, m in hierarchies.items()}
        self.unified = os.path.join(CGROUP_ROOT, "unified", self.name)
        self.made = [*dict.fromkeys(self.dirs.values()), self.unified]

    def create(self) -> None:
        """Make the directories and write jigcmd's default limits (memory read back)."""
        limits = Limits()
        for path in self.made:
            os.mkdir(path)
        limit = str(limits.memory_bytes)
        write(self.dirs["memory"], "memory.limit_in_bytes", limit)
        if os.path.exists(os.path.join(self.dirs["memory"], "memory.memsw.limit_in_bytes")):
            write(self.dirs["memory"], "memory.memsw.limit_in_bytes", limit)
        write(self.dirs["pids"], "pids.max", str(limits.pids_max))
        write(self.dirs["cpu"], "cpu.cfs_period_us", str(limits.cpu_period_us))
        write(self.dirs["cpu"], "cpu.cfs_quota_us", str(limits.cpu_quota_us))
        read(self.dirs["memory"], "memory.limit_in_bytes")

    @contextlib.contextmanager
    def joined(self) -> Iterator[None]:
        """The calling thread inside the job (what it spawns is born there), then back home."""
        home: dict[str, str] = {}  # mount point -> this thread's directory in it
        with open("/proc/thread-self/cgroup", encoding="ascii") as handle:
            for line in handle:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for controller in controllers.split(","):
                    if controller in self.hierarchies:
                        mount = self.hierarchies[controller]
                        home[mount] = os.path.join(mount, path.lstrip("/"))
        # `tasks` with 0 moves only this thread: no threadgroup lock, no RCU wait.
        for path in dict.fromkeys(self.dirs.values()):
            write(path, "tasks", "0")
        try:
            yield
        finally:
            for path in home.values():
                write(path, "tasks", "0")

    def finish(self) -> None:
        """Read the run's accounting, wait until the job is empty, remove it."""
        read(self.unified, "cpu.stat")
        read(self.dirs["memory"], "memory.max_usage_in_bytes")
        read(self.dirs["memory"], "memory.oom_control")
        read(self.dirs["pids"], "pids.events")
        # bwrap's monitor can exit before its pid 1 is gone: wait, as jigcmd does.
        deadline = time.monotonic() + 1.0
        while any(read(path, "cgroup.procs") for path in self.made):
            if time.monotonic() > deadline:
                raise SystemExit(f"{self.name}: not empty 1 s after the run")
            time.sleep(0.0001)
        self.remove()

    def remove(self) -> None:
        for path in reversed(self.made):
            if os.path.isdir(path):
                os.rmdir(path)


class Cgrouped:
    """The seccomp rung inside a fresh cgroup job per run."""

    def __init__(self, name: str, inner: Command, hierarchies: dict[str, str]) -> None:
        self.name = name
        self.inner = inner
        self.hierarchies = hierarchies

    def run(self) -> float:
        started = time.perf_counter()
        job = Job(self.hierarchies)
        try:
            job.create()
            with job.joined():
                self.inner.spawn()
            job.finish()
        finally:
            job.remove()
        return time.perf_counter() - started


class Prepared:
    """The whole C-built envelope made before the request: timed from the go to the cleanup.

    bwrap (root, seccomp) starts inside a fresh job with `sh` waiting on stdin in the
    finished envelope; after `pause` seconds (a prepared envelope waiting for a request) one
    line is the go, `sh` execs Bun, and the time runs until the job is empty and removed.
    """

    def __init__(self, name: str, inner: Seccomp, hierarchies: dict[str, str]) -> None:
        self.name = name
        self.inner = inner
        self.hierarchies = hierarchies
        self.pause = 0.0

    def run(self) -> float:
        job = Job(self.hierarchies)
        try:
            job.create()
            with job.joined(), self.inner.loaded() as (argv, fd):
                process = subprocess.Popen(
                    argv,
                    env={},
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    pass_fds=(fd,),
                )
            assert process.stdin is not None and process.stdout is not None
            if process.stdout.read(2) != b"r\n":
                raise SystemExit(f"{self.name}: the envelope did not get ready")
            time.sleep(self.pause)
            started = time.perf_counter()
            process.stdin.write(b"go\n")
            _, err = process.communicate()
            if process.returncode != 0:
                raise SystemExit(f"{self.name} failed ({process.returncode}): {err[-800:]!r}")
            job.finish()
            return time.perf_counter() - started
        finally:
            job.remove()


def write(directory: str, name: str, value: str) -> None:
    fd = os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode("ascii"))
    finally:
        os.close(fd)


def read(directory: str, name: str) -> bytes:
    fd = os.open(os.path.join(directory, name), os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def cpu_rounds(
    ladder: list[Rung],
    rounds: int,
    runs: int,
    settle: float,
    per_round: dict[str, list[float]] | None = None,
) -> dict[str, float]:
    """Machine-wide CPU ms per run per rung: the kernel's deferred work in, background out.

    Each round runs every rung's block of `runs` and then idles `settle` seconds: a network
    namespace is torn down later by a kernel worker, and that work must count for the rung
    that caused it, not the next. The machine's background (other tenants, daemons) is
    measured over an idle spell in every round and subtracted for the block's duration.
    With `per_round`, each rung's ms per run in each round is appended there too.
    """
    busy = dict.fromkeys((rung.name for rung in ladder), 0.0)
    for round_ in range(rounds):
        before, started = busy_seconds(), time.monotonic()
        time.sleep(settle)
        background = (busy_seconds() - before) / (time.monotonic() - started)
        for rung in rotated(ladder, round_):
            before, started = busy_seconds(), time.monotonic()
            for _ in range(runs):
                rung.run()
            time.sleep(settle)
            elapsed = time.monotonic() - started
            spent = busy_seconds() - before - background * elapsed
            busy[rung.name] += spent
            if per_round is not None:
                per_round.setdefault(rung.name, []).append(spent / runs * 1000)
    return {name: seconds / (rounds * runs) * 1000 for name, seconds in busy.items()}


def throughput_rounds(
    ladder: list[Rung],
    makers: dict[str, Callable[[], Rung]],
    rounds: int,
    workers: int,
    runs: int,
    *,
    settle: float,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per rung and round: runs per second with `workers` concurrent workers, and the busy
    CPU ms per run meanwhile, counted as `cpu_rounds` counts it alone (`settle`)."""
    rates: dict[str, list[float]] = {rung.name: [] for rung in ladder}
    loaded: dict[str, list[float]] = {rung.name: [] for rung in ladder}
    for round_ in range(rounds):
        for rung in rotated(ladder, round_):
            rate, cpu = under_load(makers[rung.name], workers, runs, settle)
            rates[rung.name].append(rate)
            loaded[rung.name].append(cpu)
    return rates, loaded


def v1_hierarchies() -> dict[str, str] | None:
    """Controller -> mount point for jigcmd's v1 controllers, or None when one is missing."""
    found: dict[str, str] = {}
    for controller in V1_CONTROLLERS:
        path = os.path.realpath(os.path.join(CGROUP_ROOT, controller))
        if not os.path.exists(os.path.join(path, "tasks")):
            return None
        found[controller] = path
    if not os.path.isdir(os.path.join(CGROUP_ROOT, "unified")):
        return None
    return found


Rung = Command | Cgrouped | Prepared | Bare | Serve


def rungs(bwrap: str, bun: str, workdir: Path, program: Path) -> list[Rung]:
    """The ladder, each rung one piece more than the one before it."""
    project = workdir / "project"
    shutil.copytree(PASSING, project)
    bun_host = [bun, *TEST_ARGV]
    bun_inside = [BUN_TARGET, *TEST_ARGV]
    # util-linux unshare: the namespaces and nothing else (it maps root, makes the copied
    # mount tree private, forks for the pid namespace and mounts a /proc there).
    unshare = ["unshare", "--user", "--map-root-user", "--mount"]
    others = ["--pid", "--fork", "--mount-proc", "--ipc", "--uts", "--cgroup"]
    common = [bwrap, "--die-with-parent", "--new-session", "--clearenv", "--unshare-user"]
    common += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup"]
    common += ["--unshare-net"]
    host_root = ["--bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc"]
    host_root += ["--chdir", str(project)]
    root = [arg for bind in find_runtime().binds for arg in ("--ro-bind", bind.source, bind.target)]
    root += ["--ro-bind", str(project), "/work", "--tmpfs", "/tmp", "--proc", "/proc"]
    root += ["--dev", "/dev", "--chdir", "/work"]
    seccomp = Seccomp("+seccomp", [*common, *root, *bun_inside], program)
    ladder: list[Rung] = [
        Bare(bun, workdir),
        Command("exec", ["/usr/bin/env", *bun_host], cwd=project),
        Command("user+mnt", [*unshare, *bun_host], cwd=project),
        Command("+pid..", [*unshare, *others, *bun_host], cwd=project),
        Command("+net", [*unshare, *others, "--net", *bun_host], cwd=project),
        Command("bwrap", [*common, *host_root, *bun_host]),
        Command("+root", [*common, *root, *bun_inside]),
        seccomp,
    ]
    hierarchies = v1_hierarchies()
    if hierarchies is None:
        print("+cgroups: skipped (needs jigcmd's v1 controllers and a unified mount)")
    else:
        ladder.append(Cgrouped("+cgroups", seccomp, hierarchies))
        waiting = ["--ro-bind", "/usr/bin/dash", "/bin/sh", "/bin/sh", "-c"]
        waiting += ['echo r; read -r _; exec "$0" "$@"']
        go = [*common, *root, *waiting, *bun_inside]
        ladder.append(Prepared("prepared", Seccomp("prepared", go, program), hierarchies))
    return ladder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="latency runs per rung")
    parser.add_argument("--warmup", type=int, default=3, help="unmeasured runs per rung first")
    parser.add_argument("--block", type=int, default=10, help="back-to-back runs in a row")
    parser.add_argument("--idle-ms", type=float, default=100.0, help="idle before each run")
    parser.add_argument("--cpu-runs", type=int, default=200, help="runs per rung for CPU")
    parser.add_argument("--rounds", type=int, default=5, help="CPU and throughput rounds")
    parser.add_argument("--settle-s", type=float, default=0.3, help="idle after a CPU block")
    parser.add_argument("--workers", type=int, default=4, help="concurrent workers")
    parser.add_argument("--throughput-runs", type=int, default=15, help="runs per worker")
    parser.add_argument("--no-jigcmd", action="store_true", help="leave jigcmd serve out")
    parser.add_argument(
        "--journal-on-tmpfs",
        action="store_true",
        help="also jigcmd with its state directory on /dev/shm (jigcmd/tmpfs)",
    )
    args = parser.parse_args()
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SystemExit("bwrap is not installed: apt-get install bubblewrap")
    if os.geteuid() != 0:
        raise SystemExit("run as root: the cgroup rung and jigcmd need it")
    bun = find_runtime().path
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="jigcmd-floor-")))
        # The tmpfs rung's state directory: made only when asked for.
        memory = workdir
        if args.journal_on_tmpfs:
            memory = Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="jigcmd-floor-", dir=SHM))
            )
        program = workdir / "seccomp.bpf"
        program.write_bytes(build_filter())
        ladder = rungs(bwrap, bun, workdir, program)
        cpu_by_round: dict[str, list[float]] = {}
        lock = workdir / "jigcmd.lock"
        serves: list[Serve] = []
        if not args.no_jigcmd:
            admit(lock)
            serves.append(Serve(lock, workdir / "state"))
            if args.journal_on_tmpfs:
                serves.append(_on_tmpfs(Serve(lock, memory / "state")))
            ladder.extend(serves)
        try:
            for rung in ladder:
                for _ in range(args.warmup):
                    rung.run()
            # A prepared envelope waits for its request as long as the others idle.
            for rung in ladder:
                if isinstance(rung, Prepared):
                    rung.pause = args.idle_ms / 1000
            latency = latencies(ladder, args.runs, args.idle_ms / 1000)
            for rung in ladder:
                if isinstance(rung, Prepared):
                    rung.pause = 0.0
            rotated_runs = latencies(ladder, args.runs, 0.0)
            block = max(1, args.block)
            back_to_back = latencies(ladder, max(2, args.runs // 4), 0.0, block)
            cpu = cpu_rounds(
                ladder, args.rounds, args.cpu_runs // args.rounds, args.settle_s, cpu_by_round
            )
        finally:
            for serve in serves:
                serve.close()
        makers: dict[str, Callable[[], Rung]] = {}
        for rung in ladder:
            if isinstance(rung, Serve):
                makers[rung.name] = (
                    (lambda: _on_tmpfs(Serve(lock, memory / "state")))
                    if rung.name == TMPFS_RUNG
                    else (lambda: Serve(lock, workdir / "state"))
                )
            else:
                makers[rung.name] = lambda rung=rung: rung  # type: ignore[misc]
        rates, loaded = throughput_rounds(
            ladder, makers, args.rounds, args.workers, args.throughput_runs, settle=args.settle_s
        )
    report(
        ladder,
        latency=latency,
        back_to_back=back_to_back,
        rotated_runs=rotated_runs,
        cpu=cpu,
        cpu_by_round=cpu_by_round,
        rates=rates,
        loaded=loaded,
        args=args,
    )


def ratios(rates: dict[str, list[float]], name: str) -> list[float]:
    """A rung's throughput over bare's, round by round (neighbours in time)."""
    return sorted(r / b for r, b in zip(rates[name], rates["bare"], strict=True))


def report(
    ladder: list[Rung],
    *,
    latency: dict[str, list[float]],
    back_to_back: dict[str, list[float]],
    rotated_runs: dict[str, list[float]],
    cpu: dict[str, float],
    cpu_by_round: dict[str, list[float]],
    rates: dict[str, list[float]],
    loaded: dict[str, list[float]],
    args: argparse.Namespace,
) -> None:
    base_latency = statistics.median(latency["bare"])
    rows = [
        [
            "rung",
            f"median/p95 ms (idle {args.idle_ms:g})",
            "over bare",
            f"{args.block} in a row median/p95",
            "no idle, rotated",
            "cpu ms/run",
            "cpu over previous",
            f"runs/s at {args.workers}",
            "x bare (rounds' range)",
            f"cpu ms/run at {args.workers}",
        ]
    ]
    previous: float | None = None
    for rung in ladder:
        median = statistics.median(latency[rung.name])
        step = "" if previous is None else f"{cpu[rung.name] - previous:+.2f}"
        spread = ratios(rates, rung.name)
        p95 = percentile(latency[rung.name], 0.95)
        b2b = back_to_back[rung.name]
        mixed = rotated_runs[rung.name]
        rows.append(
            [
                rung.name,
                f"{median:.2f}/{p95:.2f}",
                f"{median - base_latency:+.2f}",
                f"{statistics.median(b2b):.2f}/{percentile(b2b, 0.95):.2f}",
                f"{statistics.median(mixed):.2f}/{percentile(mixed, 0.95):.2f}",
                f"{cpu[rung.name]:.2f}",
                step,
                f"{statistics.median(rates[rung.name]):.1f}",
                f"{statistics.median(spread):.2f}x ({spread[0]:.2f}-{spread[-1]:.2f})",
                f"{statistics.median(loaded[rung.name]):.2f}",
            ]
        )
        previous = cpu[rung.name]
    print(
        f"\n{args.runs} latency rounds; CPU: {args.rounds} rounds of "
        f"{args.cpu_runs // args.rounds} runs per rung; throughput: {args.rounds} rounds of "
        f"{args.workers} workers x {args.throughput_runs} runs per rung"
    )
    print(table(rows))
    last = "+cgroups" if "+cgroups" in cpu else "+seccomp"
    # Each piece from the tool that adds the least beside it: the namespaces from unshare
    # (over one extra exec), the root, seccomp and cgroups from bwrap (over bwrap itself).
    namespaces = cpu["+net"] - cpu["exec"]
    rest = cpu[last] - cpu["bwrap"]
    floor = namespaces + rest
    print(
        f"\nCPU the envelope's pieces add per run: namespaces {namespaces:+.2f} ms (+net - exec)"
        f" + root, seccomp, cgroups {rest:+.2f} ms ({last} - bwrap) = {floor:+.2f} ms over"
        f" bare's {cpu['bare']:.2f} ms.\nWhere CPU bounds throughput, that alone caps it at"
        f" {cpu['bare'] / (cpu['bare'] + floor):.2f}x bare, whoever builds the envelope."
        f" Measured at {args.workers} workers: the namespaces alone (+net)"
        f" {statistics.median(ratios(rates, '+net')):.2f}x, the whole envelope by C tools"
        f" ({last}) {statistics.median(ratios(rates, last)):.2f}x."
    )
    if "prepared" in latency:
        prepared = statistics.median(latency["prepared"]) - base_latency
        print(
            f"Latency: the whole envelope prepared ahead by C tools answers {prepared:+.2f} ms"
            " from bare (go to cleanup against spawn to exit)"
            + (
                f"; jigcmd {statistics.median(latency['jigcmd']) - base_latency:+.2f} ms"
                " (request to response)."
                if "jigcmd" in latency
                else "."
            )
        )
    if "jigcmd" in cpu and "+cgroups" in cpu and "prepared" in latency:
        targets(latency, back_to_back, rotated_runs, cpu, rates)
        by_round(cpu_by_round)
    if TMPFS_RUNG in latency:
        durability(latency, back_to_back, cpu)
    if "jigcmd" in loaded and last in loaded:
        # Concurrency adds CPU of its own (caches, switches between processes): a rung whose
        # runs cost more under load than alone loses throughput beyond its CPU ratio.
        print(
            f"CPU per run at {args.workers} workers over the same rung's alone: jigcmd"
            f" {statistics.median(loaded['jigcmd']) / cpu['jigcmd']:.2f}x, {last}"
            f" {statistics.median(loaded[last]) / cpu[last]:.2f}x, bare"
            f" {statistics.median(loaded['bare']) / cpu['bare']:.2f}x."
        )


def targets(
    latency: dict[str, list[float]],
    back_to_back: dict[str, list[float]],
    rotated_runs: dict[str, list[float]],
    cpu: dict[str, float],
    rates: dict[str, list[float]],
) -> None:
    """jigcmd against the C envelope, as issue #26 states its targets."""
    throughput = statistics.median(
        j / c for j, c in zip(rates["jigcmd"], rates["+cgroups"], strict=True)
    )
    print(
        f"\njigcmd against the C envelope (this run): CPU per run"
        f" {cpu['jigcmd'] / cpu['+cgroups']:.2f}x +cgroups' (target <= 1.1x); throughput"
        f" {throughput:.2f}x +cgroups' (target >= 1.0x)."
    )
    for label, runs in (
        ("idle", latency),
        ("back-to-back", back_to_back),
        ("no idle, rotated", rotated_runs),
    ):
        ours, theirs = runs["jigcmd"], runs["prepared"]
        print(
            f"Latency, {label}: jigcmd {statistics.median(ours):.2f} ms median /"
            f" {percentile(ours, 0.95):.2f} p95 against prepared C"
            f" {statistics.median(theirs):.2f} / {percentile(theirs, 0.95):.2f}:"
            f" {statistics.median(ours) - statistics.median(theirs):+.2f} ms /"
            f" {percentile(ours, 0.95) - percentile(theirs, 0.95):+.2f}"
            " (target <= +2 ms median, +4 ms p95)."
        )


def _on_tmpfs(serve: Serve) -> Serve:
    """`serve` under the name of the rung whose journal is on tmpfs."""
    serve.name = TMPFS_RUNG
    return serve


def durability(
    latency: dict[str, list[float]], back_to_back: dict[str, list[float]], cpu: dict[str, float]
) -> None:
    """What the journal's fsyncs cost jigcmd: the same server with its journal on tmpfs."""
    parts = []
    for label, runs in (("idle", latency), ("back-to-back", back_to_back)):
        disk, memory = runs["jigcmd"], runs[TMPFS_RUNG]
        parts.append(
            f"{label} {statistics.median(disk) - statistics.median(memory):+.2f} ms median /"
            f" {percentile(disk, 0.95) - percentile(memory, 0.95):+.2f} p95"
        )
    print(
        "The journal's fsyncs (jigcmd against jigcmd/tmpfs): "
        + ", ".join(parts)
        + f", CPU {cpu['jigcmd'] - cpu[TMPFS_RUNG]:+.2f} ms per run."
    )


def by_round(cpu_by_round: dict[str, list[float]]) -> None:
    """Each round's CPU ratios: its rungs ran within seconds of each other, so the host's
    drift over the whole run stays out of them (docs/performance.md, the eighth round)."""
    base = cpu_by_round.get("+cgroups")
    if not base:
        return
    parts = []
    for name in ("jigcmd", "prepared"):
        if name in cpu_by_round:
            each = [r / b for r, b in zip(cpu_by_round[name], base, strict=True)]
            parts.append(f"{name} " + " / ".join(f"{ratio:.2f}" for ratio in each) + "x")
    print("CPU per run over +cgroups', round by round: " + ", ".join(parts) + ".")


if __name__ == "__main__":
    main()
