"""The machine's cgroup backend for real: limits, attach, whole-tree kill, OOM, pids, removal.

Each child waits on stdin until it has been attached, so no code of it runs outside the job.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.envelope.cgroups import CgroupBackend, CgroupJob
from jigcmd.envelope.cgroups.v1 import V1Backend
from jigcmd.plan import Limits

pytestmark = pytest.mark.envelope

GATE = "import os, sys, time\nsys.stdin.readline()\n"


class Child:
    """A Python child that starts its real work only when released."""

    def __init__(self, code: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", GATE + textwrap.dedent(code)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.close()

    def readline(self) -> bytes:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline()

    def finish(self) -> int:
        returncode = self.proc.wait(timeout=30)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return returncode


@pytest.fixture
def job(real_cgroups: CgroupBackend, job_name: str) -> Iterator[CgroupJob]:
    made = real_cgroups.create(job_name, Limits())
    yield made
    made.kill()
    made.wait_empty(5.0)
    made.remove()


def joining(job: CgroupJob) -> str:
    """A child's first lines: it joins `job` itself, as pid 1 does (`cgroups.files.join`)."""
    return (
        "from jigcmd.envelope.cgroups import files, Membership\n"
        f"files.join(Membership(*{tuple(job.membership)!r}), None)\n"
    )


def run_in(job: CgroupJob, code: str) -> Child:
    child = Child(joining(job) + textwrap.dedent(code))
    child.release()
    return child


def file_of(job: CgroupJob, name: str) -> str:
    for path in job.paths:
        candidate = Path(path) / name
        if candidate.exists():
            return candidate.read_text().strip()
    raise AssertionError(f"{name} not in {job.paths}")


def procs(job: CgroupJob) -> set[int]:
    return {int(p) for path in job.paths for p in (Path(path) / "cgroup.procs").read_text().split()}


def test_create_writes_the_limits_the_kernel_then_reports(
    job: CgroupJob, real_cgroups: CgroupBackend
) -> None:
    """256 MiB without swap (and of TCP buffers on v1), 64 tasks, half a CPU, as read back."""
    if real_cgroups.mode == "v2":
        assert file_of(job, "memory.max") == str(256 * 1024 * 1024)
        assert file_of(job, "memory.swap.max") == "0"
        assert file_of(job, "cpu.max") == "50000 100000"
    else:
        assert file_of(job, "memory.limit_in_bytes") == str(256 * 1024 * 1024)
        if any((Path(p) / "memory.memsw.limit_in_bytes").exists() for p in job.paths):
            assert file_of(job, "memory.memsw.limit_in_bytes") == str(256 * 1024 * 1024)
        if any((Path(p) / "memory.kmem.tcp.limit_in_bytes").exists() for p in job.paths):
            # Written, it turns on v1's accounting of the job's socket buffers at all.
            assert file_of(job, "memory.kmem.tcp.limit_in_bytes") == str(256 * 1024 * 1024)
        assert file_of(job, "cpu.cfs_quota_us") == "50000"
        assert file_of(job, "cpu.cfs_period_us") == "100000"
    assert file_of(job, "pids.max") == "64"
    assert job.memory_view()[1] == f"{256 * 1024 * 1024}\n"


def test_an_opened_job_has_the_directories_create_made(
    job: CgroupJob, real_cgroups: CgroupBackend
) -> None:
    """Recovery opens a job by name and finds every directory `create` made, in order."""
    opened = real_cgroups.open(job.name)
    assert opened is not None
    assert opened.paths == job.paths
    assert all(os.path.isdir(path) for path in job.paths)
    with pytest.raises(ValueError, match="one path component"):
        real_cgroups.open("../escape")


def test_a_child_that_joins_is_in_every_hierarchy_of_the_job(job: CgroupJob) -> None:
    """Joining the job's membership puts a process in each directory the job owns."""
    child = run_in(job, 'print("joined", flush=True)\ntime.sleep(600)\n')
    try:
        assert child.readline() == b"joined\n"
        for path in job.paths:
            assert child.proc.pid in {
                int(p) for p in (Path(path) / "cgroup.procs").read_text().split()
            }
        assert job.populated()
    finally:
        child.proc.kill()
        child.finish()


def test_kill_stops_a_tree_of_detached_grandchildren(job: CgroupJob) -> None:
    """Grandchildren in their own sessions die with the job, and the job reports empty."""
    child = run_in(
        job,
        """
        for _ in range(3):
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(600)
                os._exit(0)
        print("ready", flush=True)
        time.sleep(600)
        """,
    )
    assert child.readline() == b"ready\n"
    assert len(procs(job)) >= 4
    job.kill()
    assert child.finish() == -9
    assert job.wait_empty(5.0)
    assert not job.populated()
    assert procs(job) == set()


def test_kill_through_the_freezer_works_without_a_unified_hierarchy(
    real_cgroups: CgroupBackend, job_name: str
) -> None:
    """Pure v1: freeze, SIGKILL every task, thaw, until none is left."""
    if not isinstance(real_cgroups, V1Backend) or "freezer" not in real_cgroups.hierarchies:
        pytest.skip("needs v1 with a freezer hierarchy")
    pure_v1 = V1Backend(real_cgroups.hierarchies, real_cgroups.base, None)
    job = pure_v1.create(job_name, Limits())
    try:
        assert any("/freezer/" in p for p in job.paths)
        child = run_in(
            job,
            """
            for _ in range(3):
                if os.fork() == 0:
                    os.setsid()
                    time.sleep(600)
            print("ready", flush=True)
            time.sleep(600)
            """,
        )
        assert child.readline() == b"ready\n"
        job.kill()
        assert child.finish() == -9
        assert job.wait_empty(5.0)
        assert not job.populated()
    finally:
        job.kill()
        job.remove()


# The CPU the child spends once it is in the job (its start-up ran before the attach).
_BUSY_THEN_SAY_CPU = """
start = time.process_time_ns()
sum(range(3_000_000))
print(time.process_time_ns() - start, flush=True)
"""


def _assert_it_counts_a_childs_cpu(job: CgroupJob) -> None:
    """The job's CPU time covers what a child spent in it (measured by the child itself)."""
    child = run_in(job, _BUSY_THEN_SAY_CPU)
    own = int(child.readline())
    assert child.finish() == 0
    used = job.stats().cpu_usage_ns
    assert used is not None
    assert used >= own * 0.9


def _in_hierarchy(job: CgroupJob, backend: V1Backend, controller: str) -> bool:
    hierarchy = backend.hierarchies.get(controller)
    return hierarchy is not None and any(p.startswith(hierarchy + "/") for p in job.paths)


def test_a_hybrid_job_counts_its_cpu_without_a_cpuacct_or_freezer_directory(
    real_cgroups: CgroupBackend, job_name: str
) -> None:
    """With a unified hierarchy its `cpu.stat` counts the CPU and `cgroup.kill` kills."""
    if not isinstance(real_cgroups, V1Backend) or real_cgroups.unified is None:
        pytest.skip("needs a hybrid host (v1 controllers and a unified hierarchy)")
    job = real_cgroups.create(job_name, Limits())
    try:
        assert not _in_hierarchy(job, real_cgroups, "freezer")
        if real_cgroups.hierarchies.get("cpuacct") != real_cgroups.hierarchies.get("cpu"):
            assert not _in_hierarchy(job, real_cgroups, "cpuacct")
        _assert_it_counts_a_childs_cpu(job)
    finally:
        job.kill()
        job.remove()


def test_a_job_reopened_for_recovery_includes_a_cpuacct_directory_made_before(
    real_cgroups: CgroupBackend, job_name: str
) -> None:
    """A hybrid job an earlier jigcmd made had a cpuacct directory: recovery removes it too."""
    if not isinstance(real_cgroups, V1Backend) or real_cgroups.unified is None:
        pytest.skip("needs a hybrid host (v1 controllers and a unified hierarchy)")
    cpuacct = real_cgroups.hierarchies.get("cpuacct")
    if cpuacct is None or cpuacct == real_cgroups.hierarchies.get("cpu"):
        pytest.skip("needs cpuacct mounted apart from cpu")
    job = real_cgroups.create(job_name, Limits())
    earlier = os.path.join(cpuacct, real_cgroups.base, job_name)
    os.makedirs(earlier)
    try:
        reopened = real_cgroups.open(job_name)
        assert reopened is not None
        assert set(reopened.paths) == {*job.paths, earlier}
        reopened.kill()
        reopened.remove()
        assert not os.path.exists(earlier)
        assert real_cgroups.open(job_name) is None
    finally:
        job.remove()
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(earlier)


def test_a_pure_v1_job_counts_its_cpu_in_cpuacct(
    real_cgroups: CgroupBackend, job_name: str
) -> None:
    """Without a unified hierarchy the job has a cpuacct directory, and its usage is read."""
    if not isinstance(real_cgroups, V1Backend) or "cpuacct" not in real_cgroups.hierarchies:
        pytest.skip("needs v1 with a cpuacct hierarchy")
    pure_v1 = V1Backend(real_cgroups.hierarchies, real_cgroups.base, None)
    job = pure_v1.create(job_name, Limits())
    try:
        assert _in_hierarchy(job, pure_v1, "cpuacct")
        _assert_it_counts_a_childs_cpu(job)
    finally:
        job.kill()
        job.remove()


def test_an_oom_in_a_256_mib_job_is_reported(job: CgroupJob) -> None:
    """Allocating past the limit gets the child OOM-killed, and stats say so."""
    child = run_in(
        job,
        """
        chunks = []
        for _ in range(128):
            chunks.append(b"x" * (16 << 20))
        """,
    )
    assert child.finish() == -9
    assert job.wait_empty(5.0)
    stats = job.stats()
    assert stats.oom_killed
    assert stats.peak_memory_bytes is not None
    assert 128 * 1024 * 1024 < stats.peak_memory_bytes <= 256 * 1024 * 1024


def test_a_quiet_child_reports_cpu_time_and_no_oom_or_pids_hit(job: CgroupJob) -> None:
    """Plausible stats: some CPU time, nothing hit."""
    child = run_in(job, "sum(range(3_000_000))\n")
    assert child.finish() == 0
    stats = job.stats()
    assert stats.cpu_usage_ns is not None
    assert stats.cpu_usage_ns > 0
    assert not stats.oom_killed
    assert not stats.pids_limit_hit


def test_hitting_the_pids_limit_is_reported(real_cgroups: CgroupBackend, job_name: str) -> None:
    """fork fails with EAGAIN at pids.max, and pids.events records it."""
    job = real_cgroups.create(job_name, Limits(pids_max=4))
    try:
        child = run_in(
            job,
            """
            refused = 0
            for _ in range(8):
                try:
                    if os.fork() == 0:
                        time.sleep(600)
                except BlockingIOError:
                    refused += 1
            print(refused, flush=True)
            """,
        )
        assert int(child.readline()) > 0
        assert child.finish() == 0
        assert job.stats().pids_limit_hit
    finally:
        job.kill()
        job.wait_empty(5.0)
        job.remove()


def test_remove_leaves_nothing_behind(real_cgroups: CgroupBackend, job_name: str) -> None:
    """After a run and remove, no directory of the job exists and it is not listed."""
    job = real_cgroups.create(job_name, Limits())
    assert job_name in real_cgroups.list_jobs()
    child = run_in(job, "")
    assert child.finish() == 0
    assert job.wait_empty(5.0)
    job.remove()
    assert not any(os.path.lexists(p) for p in job.paths)
    assert job_name not in real_cgroups.list_jobs()
    assert real_cgroups.open(job_name) is None


def test_a_job_is_reopened_by_name_for_recovery(
    job: CgroupJob, real_cgroups: CgroupBackend
) -> None:
    """A restarted server finds the same directories and the same memory view."""
    reopened = real_cgroups.open(job.name)
    assert reopened is not None
    assert reopened.paths == job.paths
    assert reopened.memory_view() == job.memory_view()


def test_an_existing_job_name_is_refused(job: CgroupJob, real_cgroups: CgroupBackend) -> None:
    """Single use: a second create of the same name fails and leaves the first intact."""
    with pytest.raises(FileExistsError):
        real_cgroups.create(job.name, Limits())
    assert all(os.path.isdir(p) for p in job.paths)


def test_a_v1_jobs_cpuset_is_its_bases_whether_the_kernel_or_the_backend_fills_it(
    real_cgroups: CgroupBackend,
) -> None:
    """cgroup.clone_children on the base fills a new job; with it cleared, the backend does."""
    if not isinstance(real_cgroups, V1Backend) or "cpuset" not in real_cgroups.hierarchies:
        pytest.skip("needs a v1 cpuset hierarchy")
    base = f"jigcmd-test-base-{os.urandom(6).hex()}"
    backend = V1Backend(real_cgroups.hierarchies, base, real_cgroups.unified)
    cpuset_base = Path(real_cgroups.hierarchies["cpuset"]) / base
    made: list[CgroupJob] = []
    try:
        made.append(backend.create("jigcmd-by-kernel", Limits()))
        assert (cpuset_base / "cgroup.clone_children").read_text().strip() == "1"
        (cpuset_base / "cgroup.clone_children").write_text("0")
        made.append(backend.create("jigcmd-by-backend", Limits()))
        wanted = [(cpuset_base / f).read_text().strip() for f in ("cpuset.cpus", "cpuset.mems")]
        for job in made:
            (cpuset,) = [Path(p) for p in job.paths if p.startswith(str(cpuset_base))]
            have = [(cpuset / f).read_text().strip() for f in ("cpuset.cpus", "cpuset.mems")]
            assert have == wanted, job
            assert all(have), job
    finally:
        for job in made:
            job.remove()
        for hierarchy in {*real_cgroups.hierarchies.values(), real_cgroups.unified}:
            if hierarchy is not None and os.path.isdir(os.path.join(hierarchy, base)):
                os.rmdir(os.path.join(hierarchy, base))
