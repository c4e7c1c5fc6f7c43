"""The envelope on the real cgroup v2 backend: limits in the job directory, OOM, pids, CPU, kill.

Runs only inside the VM of `scripts/v2vm.py`. Every run goes through `TracedExecutor`, which
fails the test when a job directory or a process of the envelope outlives the run. Deadlines
are generous because the VM is emulated (process start-up there is up to 40x slower).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread
import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.envelope import oomscore
from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.api import EnvelopeIdentity, RunOutcome
from jigcmd.envelope.cgroups import files as cgroupfs
from jigcmd.envelope.cgroups.v2 import V2Backend
from jigcmd.plan import Limits, RunPlan
from tests.durable.recovering import move_into
from tests.envelope.hostile_candidates import OOM_SCORE
from tests.envelope.hostile_harness import TracedExecutor, attempts, probe_plan

pytestmark = pytest.mark.envelope

T = TypeVar("T")
MIB = 1 << 20
# Generous for an emulated machine; a run that hits it fails its test's assertions.
SECONDS = 120.0
# Blocks the main thread for good without spinning or an empty event loop (which would exit).
BLOCK_FOREVER = "Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);\n"
PR_SET_CHILD_SUBREAPER = 36


async def run_watched(
    envelope: TracedExecutor, plan: RunPlan, watch: Callable[[str], T]
) -> tuple[RunOutcome, T]:
    """Run `plan`; once it has started, call `watch(job directory)` in a thread, then cancel."""
    started = anyio.Event()
    cancel = CancelSignal()
    paths: list[str] = []
    seen: list[T] = []

    def on_started(message: EnvelopeIdentity) -> None:
        paths.extend(message.cgroup_paths)
        started.set()

    async def watcher() -> None:
        await started.wait()
        try:
            seen.append(await anyio.to_thread.run_sync(watch, paths[0]))
        finally:
            cancel.set()

    async with anyio.create_task_group() as group:
        group.start_soon(watcher)
        try:
            outcome = await envelope.run(plan, cancel, on_started)
        finally:
            # A run that ended without starting (or by itself) leaves no one to watch.
            group.cancel_scope.cancel()
    assert seen, "the run ended before the watch did"
    assert len(paths) == 1, f"a v2 job is one directory: {paths}"
    return outcome, seen[0]


def limit_files(job: str) -> dict[str, str]:
    """The limit files of a job directory, as the kernel reports them."""
    names = ("memory.max", "memory.swap.max", "pids.max", "cpu.max")
    return {name: cgroupfs.read(os.path.join(job, name)).strip() for name in names}


async def test_the_plans_limits_are_what_the_kernel_reports_in_the_job_directory(
    envelope: TracedExecutor, v2: V2Backend
) -> None:
    """memory.max, memory.swap.max, pids.max and cpu.max of a running job are the plan's."""
    plan = probe_plan(BLOCK_FOREVER, seconds=SECONDS)
    outcome, files = await run_watched(envelope, plan, limit_files)
    limits = plan.limits
    assert files == {
        "memory.max": str(limits.memory_bytes),
        "memory.swap.max": "0",
        "pids.max": str(limits.pids_max),
        "cpu.max": f"{limits.cpu_quota_us} {limits.cpu_period_us}",
    }
    assert outcome.stop_reason == "cancelled"


async def test_a_running_job_sits_in_its_own_directory_under_the_jobs_base(
    envelope: TracedExecutor, v2: V2Backend
) -> None:
    """The job is a direct child of the base, listed by the backend while it runs, then gone."""

    def where(job: str) -> tuple[str, list[str], bool]:
        return os.path.dirname(job), v2.list_jobs(), cgroupfs.pids_in(job + "/cgroup.procs") != []

    outcome, (parent, listed, has_tasks) = await run_watched(
        envelope, probe_plan(BLOCK_FOREVER, seconds=SECONDS), where
    )
    job = envelope.traces[-1].job
    assert parent == v2.base_path
    assert job in listed
    assert has_tasks
    assert job not in v2.list_jobs()
    assert outcome.stop_reason == "cancelled"


async def test_a_spinning_candidate_is_throttled_by_cpu_max(envelope: TracedExecutor) -> None:
    """A busy loop under a quota of half a CPU shows up as nr_throttled > 0 in cpu.stat."""

    def throttled(job: str) -> dict[str, int]:
        stat = os.path.join(job, "cpu.stat")
        cgroupfs.poll_until(lambda: cgroupfs.keyed(stat).get("nr_throttled", 0) > 0, SECONDS / 2)
        return cgroupfs.keyed(stat)

    outcome, stat = await run_watched(
        envelope, probe_plan("for (;;) {}\n", seconds=SECONDS), throttled
    )
    assert stat["nr_throttled"] > 0
    assert stat["throttled_usec"] > 0
    assert outcome.stop_reason == "cancelled"
    assert outcome.report.cpu_ms is not None and outcome.report.cpu_ms > 0


async def test_memory_peak_is_reported_for_a_run_that_stays_under_the_limit(
    envelope: TracedExecutor,
) -> None:
    """A candidate that touches 96 MiB exits normally with a peak of at least that much."""
    source = (
        "const keep: Buffer[] = [];\n"
        "for (let i = 0; i < 12; i++) keep.push(Buffer.alloc(8 << 20, 1));\n"
        'console.log("held", keep.length);\n'
    )
    outcome = await envelope.run(probe_plan(source, seconds=SECONDS))
    assert (outcome.exit_code, outcome.stop_reason) == (0, "exited")
    peak = outcome.report.peak_memory_bytes
    assert peak is not None
    assert 96 * MIB <= peak < Limits().memory_bytes
    assert not outcome.report.oom_killed


async def test_allocating_past_memory_max_is_an_oom_kill_at_the_limit(
    envelope: TracedExecutor,
) -> None:
    """Touching 512 MiB in chunks is SIGKILLed by the kernel; the report says OOM, peak <= limit."""
    source = (
        "const keep: Buffer[] = [];\n"
        "for (let i = 0; i < 64; i++) keep.push(Buffer.alloc(8 << 20, 1));\n"
        'console.log("survived");\n'
    )
    outcome = await envelope.run(probe_plan(source, seconds=SECONDS))
    assert (outcome.signal, outcome.stop_reason) == ("SIGKILL", "exited")
    assert outcome.report.oom_killed
    assert b"survived" not in outcome.stdout.data
    peak = outcome.report.peak_memory_bytes
    limit = Limits().memory_bytes
    assert peak is not None
    assert limit // 2 < peak <= limit


async def test_the_candidates_oom_score_is_pinned_at_1000_by_root(
    envelope: TracedExecutor,
) -> None:
    """Root here holds CAP_SYS_RESOURCE, so the score is a floor: lowering it fails, for the
    candidate and for its children alike."""
    assert oomscore.PINNED
    outcome = await envelope.run(probe_plan(OOM_SCORE, seconds=SECONDS))
    assert (outcome.exit_code, outcome.stop_reason) == (0, "exited")
    seen = attempts(outcome.stdout.data.decode())
    assert seen["read before"].detail == seen["read after"].detail == "1000"
    for name in ("lower to 0", "lower to -1000", "lower to 999", "child lowers"):
        assert (seen[name].ok, seen[name].detail) == (False, "EACCES"), seen[name]


async def test_spawning_processes_past_pids_max_is_reported(envelope: TracedExecutor) -> None:
    """Child processes are refused at pids.max and the report says the pids limit was hit."""
    source = (
        'const quiet = { stdio: ["ignore", "ignore", "ignore"] } as const;\n'
        "const children = [];\n"
        "try {\n"
        "  for (let i = 0; i < 200; i++) children.push(\n"
        '    Bun.spawn([process.execPath, "-e", "await Bun.sleep(1e9)"], quiet),\n'
        "  );\n"
        '} catch (error) { console.log("refused after", children.length, String(error)); }\n'
        "process.exit(0);\n"
    )
    outcome = await envelope.run(probe_plan(source, seconds=SECONDS))
    assert (outcome.exit_code, outcome.stop_reason) == (0, "exited")
    assert b"refused after" in outcome.stdout.data
    assert outcome.report.pids_limit_hit


DAEMON = """
import { writeFileSync } from "node:fs";
writeFileSync(`/tmp/daemon-${process.pid}`, "up");
await Bun.sleep(1e9);
"""

MIDDLE = """
for (let i = 0; i < 2; i++) {
  Bun.spawn([process.execPath, "daemon.ts"], { stdio: ["ignore", "ignore", "ignore"] }).unref();
}
process.exit(0);
"""

MAIN = """
import { readdirSync } from "node:fs";
const quiet = { stdio: ["ignore", "ignore", "ignore"] } as const;
const middle = Bun.spawn([process.execPath, "middle.ts"], quiet);
await middle.exited;
let daemons: string[] = [];
while (daemons.length < 2) {
  daemons = readdirSync("/tmp").filter((name) => name.startsWith("daemon-"));
  await Bun.sleep(20);
}
console.log(JSON.stringify({ middle: middle.exitCode, daemons: daemons.length }));
"""


async def test_double_forked_daemons_die_with_the_run(envelope: TracedExecutor) -> None:
    """Daemons orphaned by their exited parent are still running at the end and then killed."""
    plan = probe_plan(MAIN, seconds=SECONDS, files=(("middle.ts", MIDDLE), ("daemon.ts", DAEMON)))
    outcome = await envelope.run(plan)
    assert (outcome.exit_code, outcome.stop_reason) == (0, "exited")
    assert outcome.stdout.data.strip() == b'{"middle":0,"daemons":2}'
    # TracedExecutor has already proved that no process is left in the job or namespaces.


DOUBLE_FORK = """
import os, signal, sys
out = int(sys.argv[1])
for _ in range(3):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(out, b"%d\\n" % os.getpid())
            while True:
                signal.pause()
        os._exit(0)
    os.wait()
"""


def test_cgroup_kill_takes_a_whole_double_forked_tree(v2: V2Backend) -> None:
    """Writing cgroup.kill SIGKILLs setsid daemons whose parents are gone; the job empties."""
    job = v2.create(f"jigcmd-v2vm-{uuid.uuid4().hex[:12]}", Limits())
    read_end, write_end = os.pipe()
    gate_r, gate_w = os.pipe()
    # Orphaned daemons come to us, so we can reap them and see how they died.
    sc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        gate = f"import os; os.read({gate_r}, 1)\n"
        child = subprocess.Popen(
            [sys.executable, "-c", gate + textwrap.dedent(DOUBLE_FORK), str(write_end)],
            pass_fds=(write_end, gate_r),
        )
        os.close(write_end)
        os.close(gate_r)
        move_into(job, child.pid)
        os.write(gate_w, b"g")
        assert child.wait(timeout=SECONDS) == 0
        with os.fdopen(read_end, "rb") as reader:
            daemons = [int(reader.readline()) for _ in range(3)]
        assert set(cgroupfs.pids_in(job.paths[0] + "/cgroup.procs")) == set(daemons)
        job.kill()
        deaths = {pid: os.waitpid(pid, 0)[1] for pid in daemons}
        assert job.wait_empty(SECONDS)
    finally:
        sc.prctl(PR_SET_CHILD_SUBREAPER, 0)
        os.close(gate_w)
        job.kill()
        job.wait_empty(SECONDS)
        job.remove()
    assert all(os.WTERMSIG(status) == signal.SIGKILL for status in deaths.values()), deaths
    assert not os.path.exists(job.paths[0])
