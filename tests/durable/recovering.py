"""What recovery's tests build: a dead server's journal rows, a stand-in supervisor, cgroups.

`FakeBackend` holds cgroup jobs in memory for recovery's decisions; `real_backend` is the
machine's (root only). Shared by the recovery, sweep and `jigcmd recover` suites.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from jigcmd.envelope.cgroups import CgroupBackend, CgroupJob, CgroupStats, Membership, Mode
from jigcmd.envelope.cgroups import files as cgroupfs
from jigcmd.journal.identity import ProcessIdentity, identify
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal
from jigcmd.plan import Limits
from tests.required import usable_cgroups

__all__ = [
    "RUN",
    "FakeBackend",
    "FakeJob",
    "begin_row",
    "fake_supervisor",
    "in_dead_server",
    "move_into",
    "processes",
    "real_backend",
    "running",
]

# The caller's run of these tests' operations.
RUN = "run-a"


def move_into(job: CgroupJob, pid: int) -> None:
    """Put another process (a stand-in candidate) into every directory of `job`.

    jigcmd itself never moves a process: pid 1 is born in the job and joins the rest itself.
    """
    for path in job.paths:
        cgroupfs.write(os.path.join(path, "cgroup.procs"), str(pid))


class FakeJob:
    """A cgroup job held in memory: `stuck` tasks survive every kill."""

    def __init__(self, backend: FakeBackend, name: str, *, stuck: bool = False) -> None:
        self.backend = backend
        self.name = name
        self.paths: tuple[str, ...] = (f"/nonexistent/jigcmd/{name}",)
        self.tasks = 1
        self.stuck = stuck
        self.killed = 0

    @property
    def birth_dir(self) -> str | None:
        return None

    @property
    def membership(self) -> Membership:
        return Membership(self.paths, None)

    def join(self, born_in: str | None) -> None:
        self.tasks += 1

    def pin(self, cpus: tuple[int, ...]) -> bool:
        return False

    def kill(self) -> None:
        self.killed += 1
        if not self.stuck:
            self.tasks = 0

    def populated(self) -> bool:
        return self.tasks > 0

    def wait_empty(self, timeout: float) -> bool:
        return self.tasks == 0

    def cpu_usage_ns(self) -> int | None:
        return None

    def stats(self) -> CgroupStats:
        return CgroupStats(
            cpu_usage_ns=None, peak_memory_bytes=None, oom_killed=False, pids_limit_hit=False
        )

    def memory_view(self) -> tuple[str, str]:
        return ("/sys/fs/cgroup/memory.max", "max\n")

    def remove(self, *, wait: float = 0.5) -> None:
        if self.tasks:
            raise OSError(16, "Device or resource busy")
        del self.backend.jobs[self.name]


class FakeBackend:
    """An in-memory cgroup backend for recovery's decisions."""

    def __init__(self) -> None:
        self.jobs: dict[str, FakeJob] = {}

    @property
    def mode(self) -> Mode:
        return "v2"

    def add(self, name: str, *, stuck: bool = False) -> FakeJob:
        job = self.jobs[name] = FakeJob(self, name, stuck=stuck)
        return job

    def create(self, name: str, limits: Limits) -> CgroupJob:
        return self.add(name)

    def open(self, name: str) -> CgroupJob | None:
        return self.jobs.get(name)

    def list_jobs(self) -> list[str]:
        return sorted(self.jobs)

    def problems(self) -> list[str]:
        return []

    def pins(self) -> list[tuple[int, ...]]:
        return []

    def cpuset_bound(self) -> tuple[str, tuple[int, ...]] | None:
        return None


def in_dead_server(state: Path, action: Callable[[Journal], object]) -> None:
    """Run `action` on the journal in a forked "server" process that then exits (so is dead)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            with Journal.open(state) as journal:
                action(journal)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def begin_row(journal: Journal, operation_id: str, run_id: str, root_run: str = RUN) -> None:
    journal.begin(
        NewRow(
            root_run=root_run,
            operation_id=operation_id,
            signature="sig",
            context="session",
            deadline_unix_ms=0,
            run_id=run_id,
        )
    )


def running(
    operation_id: str, run_id: str, supervisor: ProcessIdentity, root_run: str = RUN
) -> Callable[[Journal], object]:
    def action(journal: Journal) -> None:
        begin_row(journal, operation_id, run_id, root_run)
        journal.record_envelope(
            operation_id,
            root_run=root_run,
            supervisor=supervisor,
            cgroup_paths=(),
            netns="net:[1]",
            plan_digest="sha256:p",
        )

    return action


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Helper processes this test started; any left is killed by its pid and reaped."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdin is not None:
            proc.stdin.close()


def fake_supervisor(processes: list[subprocess.Popen[bytes]]) -> ProcessIdentity:
    """A stand-in supervisor that ignores everything but SIGKILL."""
    proc = subprocess.Popen(["sleep", "1000"])
    processes.append(proc)
    who = identify(proc.pid)
    assert who is not None
    return who


@pytest.fixture
def real_backend() -> CgroupBackend:
    """The machine's cgroups (root only); skipped locally, failed under CI, when missing."""
    return usable_cgroups()
