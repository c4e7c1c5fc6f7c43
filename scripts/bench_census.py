"""Where a call's CPU goes, jigcmd against the C envelope, by every thread the machine ran.

`bench_floor.py` weighs jigcmd's CPU per run against its own C envelope (`+cgroups`:
bubblewrap, jigcmd's seccomp filter, a fresh cgroup job) and `bench_cpu_split.py` splits
jigcmd's among its processes. This puts both side by side in one run, with what neither
shows: the kernel's workers (a network namespace's teardown, a cgroup's release, the
journal's writeback) and the benchmark's own share. Blocks of `--calls` calls of each
alternate, `--rounds` times, each block followed by a settle so that the deferred work it
caused lands in it. jigcmd's jobs are counted by their parent (its `--cgroup-base` of their
own: a cgroup2 `cpu.stat` keeps its removed children's time), the C rung's processes by
this process's reaped children (it is their subreaper: bwrap's namespace init outlives the
bwrap that made it). Every other thread's CPU is read before and after from /proc
(`schedstat`, nanoseconds).

  pid 1 and the candidate   jigcmd's jobs: every pid 1 (prepared or gone) and what it spawned
  spawner, zygote, server   jigcmd's processes (the server with its threads)
  bwrap and the candidate   the C rung: bwrap and what it spawned
  this benchmark            its own process: the C rung's fork, exec and cgroup calls; for
                            jigcmd, writing each request and reading its answer
  kernel workers            the kernel's threads (kworkers, RCU, softirq, jbd2, ...)
  the machine's background  every other thread (other tenants, daemons, DAMON's kdamond): in
                            the total, left out of the ratio. Threads that began and ended
                            within a block, outside the jobs, are missed (the total has them).

The summary ends with what the CPU target (at most 1.1 times the C rung's) leaves the
coordinator, the envelope's share as measured: the server and the zygote's budget a call.

A second table counts the pages each of jigcmd's processes faulted in per call (`minflt`;
in a process forked from a larger one these are mostly copy-on-write copies, ~2.4 µs each
here), and the envelopes' own: jigcmd's pid 1s and candidates as the zygote reaps them, the
C rung's bwraps and candidates as this process does. Counts, not times: they do not move
with the machine's load, so a change in them shows on a noisy day.

With `--workers 1 4`, each side also runs under load: 4 `jigcmd serve` sessions on one state
directory (as `bench_floor.py`'s throughput does) against 4 threads of the C rung, each
block's calls shared among them, and the report adds what each line costs per call under
load over alone, which the throughput target (at 4 sessions) meets and a sequential census
cannot show.

Run as root: python scripts/bench_census.py [--calls 120] [--rounds 3] [--idle-ms 100]
  [--workers 1 [4]]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import resource
import secrets
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout: the sibling benchmarks (and the package) must be importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jigcmd.command.runtime import find_runtime  # noqa: E402 - needs the path set up above
from jigcmd.envelope.seccomp import build_filter  # noqa: E402 - likewise
from scripts.bench_cpu_split import Accounting  # noqa: E402 - likewise
from scripts.bench_envelope import Serve, admit, busy_seconds  # noqa: E402 - likewise
from scripts.bench_floor import rungs, v1_hierarchies  # noqa: E402 - likewise

# After a block: a network namespace is torn down by a kernel worker once its last user is
# gone, and that work belongs to the block that caused it.
SETTLE_S = 1.0
KTHREADD = 2
_PR_SET_CHILD_SUBREAPER = 36
# Issue #26: jigcmd's CPU a call at most this many times the C rung's.
TARGET = 1.1
BACKGROUND = "the machine's background"
JIGCMD = ("pid 1 and the candidate", "spawner", "zygote", "server")
C_ENVELOPE = ("bwrap and the candidate",)
SHARED = ("this benchmark", "kernel workers", BACKGROUND)
# The pages faulted in by each side's envelopes: jigcmd's pid 1s and candidates as the zygote
# reaps them (its `cminflt`), the C rung's bwrap and candidates as this process reaps them.
ENVELOPES = "pid 1s or bwraps, and candidates"
FAULT_ROWS = ("server", "zygote", "spawner", ENVELOPES)


class Task(NamedTuple):
    """One thread as /proc shows it."""

    name: str
    tgid: int
    ppid: int
    on_cpu_ns: int
    # Pages this thread faulted in (in a forked process, mostly copies of pages it shares),
    # and its process's waited-for children's (`cminflt`: the zygote's reaped pid 1s).
    minflt: int
    cminflt: int


def snapshot() -> dict[int, Task]:
    """Every thread of the machine, by tid."""
    found: dict[int, Task] = {}
    for pid in (int(name) for name in os.listdir("/proc") if name.isdigit()):
        try:
            tids = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for tid in tids:
            try:
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_bytes()
                on_cpu = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            name = stat[stat.index(b"(") + 1 : stat.rindex(b")")].decode(errors="replace")
            fields = stat[stat.rindex(b")") + 2 :].split()
            ppid, minflt, cminflt = int(fields[1]), int(fields[7]), int(fields[8])
            found[tid] = Task(name, pid, ppid, on_cpu, minflt, cminflt)
    return found


def category_of(task: Task, servers: frozenset[int], own: int) -> str | None:
    """Which line of the table a thread's CPU goes to (None: counted elsewhere)."""
    if task.tgid == own or task.name == "jigcmd-init":
        return None  # this process by its rusage; a pid 1 by its job's accounting
    if task.name.startswith("kdamond"):
        return BACKGROUND  # DAMON's monitor: a kernel thread, busy whatever runs
    if KTHREADD in (task.tgid, task.ppid):
        return "kernel workers"
    if servers:
        if task.tgid in servers:
            return "server"
        if task.name in ("jigcmd-zygote", "jigcmd-spawner"):
            return task.name.removeprefix("jigcmd-")
    return BACKGROUND


def spent(
    before: dict[int, Task], after: dict[int, Task], servers: frozenset[int], own: int
) -> tuple[Counter[str], Counter[str]]:
    """Nanoseconds each category's living threads spent between two snapshots, and the
    pages they faulted in (jigcmd's processes only; the zygote's reaped pid 1s as ENVELOPES)."""
    totals: Counter[str] = Counter()
    faults: Counter[str] = Counter()
    for tid, task in after.items():
        kind = category_of(task, servers, own)
        if kind is not None:
            earlier = before.get(tid)
            totals[kind] += task.on_cpu_ns - (earlier.on_cpu_ns if earlier else 0)
            if kind in JIGCMD:
                faults[kind] += task.minflt - (earlier.minflt if earlier else 0)
                if kind == "zygote" and tid == task.tgid:
                    faults[ENVELOPES] += task.cminflt - (earlier.cminflt if earlier else 0)
    return totals, faults


class Contender(NamedTuple):
    """One side: how each worker makes a call, its servers (none: the C rung), its envelopes'
    CPU, and how to collect what its calls left (the C rung's orphans, reaped)."""

    runs: tuple[Callable[[], object], ...]
    servers: frozenset[int]
    envelopes_ns: Callable[[], int]
    line: str
    reap: Callable[[], None] = lambda: None


def block(contender: Contender, calls: int, idle: float) -> dict[str, float]:
    """ms per call by category for `calls` calls (shared among the workers), and the
    machine's total."""
    workers = len(contender.runs)
    calls -= calls % workers
    before = snapshot()
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    jobs0 = contender.envelopes_ns()
    reaped0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    busy0 = busy_seconds()
    _drive(contender.runs, calls // workers, idle)
    # Reaped once the calls are done (a reap during them could take a worker's bwrap from
    # under its `subprocess.run`), and again after the settle for the inits that outlived it.
    contender.reap()
    time.sleep(SETTLE_S)
    contender.reap()
    busy1 = busy_seconds()
    jobs1 = contender.envelopes_ns()
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    totals, faults = spent(before, snapshot(), contender.servers, os.getpid())
    if not contender.servers:
        faults[ENVELOPES] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - reaped0
    totals["this benchmark"] = _rusage_ns(self1) - _rusage_ns(self0)
    totals[contender.line] = jobs1 - jobs0
    ms = {kind: ns / 1e6 / calls for kind, ns in totals.items()}
    ms["machine total"] = (busy1 - busy0) * 1000 / calls
    ms.update({f"faults: {kind}": count / calls for kind, count in faults.items()})
    return ms


def _drive(runs: tuple[Callable[[], object], ...], each: int, idle: float) -> None:
    """`each` calls by every worker, the workers at once when there are several."""

    def work(run: Callable[[], object]) -> None:
        for _ in range(each):
            time.sleep(idle)
            run()

    if len(runs) == 1:
        work(runs[0])
        return
    threads = [threading.Thread(target=work, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _rusage_ns(usage: resource.struct_rusage) -> int:
    return round((usage.ru_utime + usage.ru_stime) * 1e9)


def _reaped_ns() -> int:
    return _rusage_ns(resource.getrusage(resource.RUSAGE_CHILDREN))


def _reap_orphans() -> None:
    """Reap every orphan left to this subreaper (their CPU is counted then)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG) is not None:
            pass


def jigcmd_name(workers: int) -> str:
    return "jigcmd" if workers == 1 else f"jigcmd x{workers}"


def c_name(workers: int) -> str:
    return "+cgroups" if workers == 1 else f"+cgroups x{workers}"


def report(results: dict[str, list[dict[str, float]]], workers: list[int]) -> None:
    """The table: each category's median ms per call over the rounds, and the ratios."""
    names = list(results)
    rows = [*JIGCMD, *C_ENVELOPE, *SHARED]
    width = max(12, *(len(n) + 2 for n in names))
    print(f"{'ms per call (median of rounds)':32}" + "".join(f"{n:>{width}}" for n in names))
    med = {
        n: {r: statistics.median(c.get(r, 0.0) for c in results[n]) for r in rows} for n in names
    }
    for row in rows:
        print(f"{row:32}" + "".join(f"{med[n][row]:{width}.2f}" for n in names))
    total = {n: statistics.median(c["machine total"] for c in results[n]) for n in names}
    print(f"{'machine total':32}" + "".join(f"{total[n]:{width}.2f}" for n in names))
    counted = {n: sum(med[n][r] for r in rows if r != BACKGROUND) for n in names}
    print(f"{'all but the background':32}" + "".join(f"{counted[n]:{width}.2f}" for n in names))
    for w in workers:
        jig, c = jigcmd_name(w), c_name(w)
        print(
            f"\n{jig} / {c}: machine total {total[jig] / total[c]:.2f}x, all but the"
            f" background {counted[jig] / counted[c]:.2f}x; round by round "
            + " / ".join(
                f"{a['machine total'] / b['machine total']:.2f}"
                for a, b in zip(results[jig], results[c], strict=True)
            )
        )
        own = sum(med[jig][r] for r in ("pid 1 and the candidate", "spawner", "kernel workers"))
        theirs = med[c]["bwrap and the candidate"] + med[c]["kernel workers"]
        coordinator = med[jig]["server"] + med[jig]["zygote"]
        print(
            f"The envelope (pid 1, the candidate, the spawner, the kernel's workers): {own:.2f}"
            f" against bwrap's {theirs:.2f}; the coordinator (server, zygote):"
            f" {coordinator:.2f} (the zygote's cgroup calls in it,"
            " the C rung's in this benchmark's line)."
        )
        budget = TARGET * counted[c] - (counted[jig] - coordinator)
        print(
            f"At {TARGET}x the C rung's (issue #26's CPU target) this envelope leaves the"
            f" coordinator {budget:.2f} ms a call ({budget - coordinator:+.2f} against now)."
        )
    _faults(results, names, width)
    for w in workers[1:]:
        _under_load(med, counted, workers[0], w)


def _faults(results: dict[str, list[dict[str, float]]], names: list[str], width: int) -> None:
    """The pages each process faulted in per call: a count, not a time, so it holds on a noisy
    machine. In a process forked from a larger one they are mostly copies of shared pages."""
    print(f"\n{'pages faulted in per call':32}" + "".join(f"{n:>{width}}" for n in names))
    for row in FAULT_ROWS:
        cells = [statistics.median(c.get(f"faults: {row}", 0.0) for c in results[n]) for n in names]
        print(f"{row:32}" + "".join(f"{cell:{width}.1f}" for cell in cells))


def _under_load(
    med: dict[str, dict[str, float]], counted: dict[str, float], alone: int, loaded: int
) -> None:
    """What each line costs per call with `loaded` workers more than with `alone`."""
    print(f"\nUnder load: ms per call with {loaded} workers over {alone} (and the ratio)")
    pairs = [
        (jigcmd_name(alone), jigcmd_name(loaded), (*JIGCMD, "kernel workers")),
        (c_name(alone), c_name(loaded), (*C_ENVELOPE, "this benchmark", "kernel workers")),
    ]
    for before, after, lines in pairs:
        parts = [f"{r} {med[after][r] - med[before][r]:+.2f}" for r in lines]
        grown = counted[after] - counted[before]
        print(
            f"  {after}: {grown:+.2f} ({counted[after] / counted[before]:.2f}x): "
            + ", ".join(parts)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=120, help="calls per block")
    parser.add_argument("--rounds", type=int, default=3, help="blocks of each, alternating")
    parser.add_argument("--idle-ms", type=float, default=100.0, help="idle before each call")
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[1],
        help="concurrent workers of each side, one column pair each (e.g. 1 4)",
    )
    args = parser.parse_args()
    workers = sorted(set(args.workers))
    if workers[0] < 1:
        raise SystemExit("--workers: each count must be at least 1")
    if args.calls < workers[-1]:
        raise SystemExit(f"--calls {args.calls}: a block needs at least one call per worker")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SystemExit("bwrap is not installed: apt-get install bubblewrap")
    if os.geteuid() != 0 or v1_hierarchies() is None:
        raise SystemExit("run as root on a host with jigcmd's v1 controllers (bench_floor.py)")
    jobs_base = f"jigcmd-census-jobs-{secrets.token_hex(4)}"
    # bwrap's namespace init is orphaned when bwrap exits first: reaped here, not by init.
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1) != 0:
        raise SystemExit(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")
    try:
        results = _measure(
            bwrap,
            jobs_base,
            calls=args.calls,
            idle=args.idle_ms / 1000,
            rounds=args.rounds,
            workers=workers,
        )
    finally:
        for group in Path("/sys/fs/cgroup").glob(f"*/{jobs_base}"):
            with contextlib.suppress(OSError):
                group.rmdir()
    print(
        f"{args.rounds} rounds of {args.calls} calls each (shared among the workers),"
        f" {args.idle_ms:g} ms idle before each, a {SETTLE_S:g} s settle after each block"
    )
    report(results, workers)


def _measure(
    bwrap: str, jobs_base: str, *, calls: int, idle: float, rounds: int, workers: list[int]
) -> dict[str, list[dict[str, float]]]:
    with tempfile.TemporaryDirectory(prefix="jigcmd-census-") as name:
        work = Path(name)
        program = work / "seccomp.bpf"
        program.write_bytes(build_filter())
        ladder = rungs(bwrap, find_runtime().path, work, program)
        (c_rung,) = (rung for rung in ladder if rung.name == "+cgroups")
        admit(work / "jigcmd.lock")
        sessions: list[Serve] = []
        try:
            for _ in range(workers[-1]):
                sessions.append(
                    Serve(
                        work / "jigcmd.lock",
                        work / "state",
                        extra_args=("--cgroup-base", jobs_base),
                    )
                )
            contenders = _contenders(sessions, c_rung.run, jobs_base, workers)
            for contender in contenders.values():
                for run in contender.runs:
                    for _ in range(5):
                        run()
                contender.reap()
            results: dict[str, list[dict[str, float]]] = {n: [] for n in contenders}
            for round_ in range(rounds):
                order = list(contenders) if round_ % 2 == 0 else list(reversed(contenders))
                for n in order:
                    results[n].append(block(contenders[n], calls, idle))
        finally:
            for session in sessions:
                session.close()
    return results


def _contenders(
    sessions: list[Serve], c_run: Callable[[], float], jobs_base: str, workers: list[int]
) -> dict[str, Contender]:
    """Each side at each worker count: jigcmd's first `w` sessions, `w` threads of C."""
    jobs = Accounting(jobs_base).used_ns
    found: dict[str, Contender] = {}
    for w in workers:
        chosen = sessions[:w]
        found[jigcmd_name(w)] = Contender(
            tuple(session.run for session in chosen),
            frozenset(session.process.pid for session in chosen),
            jobs,
            "pid 1 and the candidate",
        )
        found[c_name(w)] = Contender(
            (c_run,) * w, frozenset(), _reaped_ns, "bwrap and the candidate", reap=_reap_orphans
        )
    return found


if __name__ == "__main__":
    main()
