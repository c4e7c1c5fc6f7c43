"""The typed interface of the cgroup backends: a backend makes jobs, one job per envelope."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

if TYPE_CHECKING:
    from jigcmd.plan import Limits

__all__ = [
    "V1_CONTROLLERS",
    "CgroupBackend",
    "CgroupJob",
    "CgroupStats",
    "CgroupUnavailable",
    "Membership",
    "Mode",
    "check_job_name",
    "is_job_name",
]

Mode = Literal["v1", "v2", "hybrid"]

# Controller names a v1 cgroup mount can carry in its super options.
V1_CONTROLLERS = frozenset(
    {
        "blkio",
        "cpu",
        "cpuacct",
        "cpuset",
        "devices",
        "freezer",
        "hugetlb",
        "memory",
        "misc",
        "net_cls",
        "net_prio",
        "perf_event",
        "pids",
        "rdma",
    }
)

_JOB_NAME = re.compile(r"jigcmd[A-Za-z0-9_.-]{0,58}")


class CgroupUnavailable(OSError):
    """Raised when no cgroup hierarchy is mounted where jigcmd looks for one."""


class CgroupStats(NamedTuple):
    """What the kernel accounted for one job; None where this kernel does not say."""

    cpu_usage_ns: int | None
    peak_memory_bytes: int | None
    oom_killed: bool
    pids_limit_hit: bool


class Membership(NamedTuple):
    """Where a process joins a job: plain data, so that it can travel to another process.

    `v1`: the job's v1 directories, joined through `tasks` (or `cgroup.procs`); `unified`:
    its cgroup2 directory (None on pure v1), where a child can be born with clone3.
    """

    v1: tuple[str, ...]
    unified: str | None


class CgroupJob(Protocol):
    """The cgroup(s) of one single-use envelope."""

    @property
    def name(self) -> str:
        """The job's directory name, `jigcmd…`."""
        ...

    @property
    def paths(self) -> tuple[str, ...]:
        """Every directory this job owns, for the journal and recovery."""
        ...

    @property
    def birth_dir(self) -> str | None:
        """The job's cgroup2 directory, where a child can be born (clone3); None on pure v1."""
        ...

    @property
    def membership(self) -> Membership:
        """The directories a process joins (`join`), as plain data for a process without the job."""
        ...

    def join(self, born_in: str | None) -> None:
        """Move the calling single-threaded process into every hierarchy but `born_in`.

        The cheap way: v1 hierarchies through `tasks` (moving one thread, the caller, skips
        the threadgroup lock whose first taker waits for an RCU grace period); a cgroup2
        directory the caller was not born in through `cgroup.procs`.
        """
        ...

    def pin(self, cpus: tuple[int, ...]) -> bool:
        """Confine the job to `cpus` through a cpuset; False where the job has none (OSError
        when the kernel refuses or narrows the set)."""
        ...

    def kill(self) -> None:
        """SIGKILL every task of the job (cgroup.kill, or freeze + kill loop on pure v1)."""
        ...

    def populated(self) -> bool:
        """Whether any task is left in any hierarchy of the job."""
        ...

    def wait_empty(self, timeout: float) -> bool:
        """Wait until no task is left; False if some remain at `timeout` seconds."""
        ...

    def cpu_usage_ns(self) -> int | None:
        """CPU time of the job so far (one file: the cheap look before a run starts)."""
        ...

    def stats(self) -> CgroupStats:
        """CPU time, peak memory, OOM kill and pids-limit hit of the job so far."""
        ...

    def memory_view(self) -> tuple[str, str]:
        """(path inside the envelope where Bun reads its memory limit, the file's content)."""
        ...

    def remove(self, *, wait: float = ...) -> None:
        """rmdir every directory of the job; raise unless each is gone.

        The kernel refuses (EBUSY) to remove a cgroup that still holds a task, so a removal
        that succeeds proves the job empty; EBUSY is retried for up to `wait` seconds (a
        task still exiting), 0 to try once.
        """
        ...


class CgroupBackend(Protocol):
    """Creates, re-opens and lists jobs in one cgroup layout."""

    @property
    def mode(self) -> Mode:
        """Which layout this backend drives."""
        ...

    def create(self, name: str, limits: Limits) -> CgroupJob:
        """A fresh job with `limits` written; any limit that cannot be written is an OSError."""
        ...

    def open(self, name: str) -> CgroupJob | None:
        """An existing job by name (recovery after a crash), or None when none of it exists."""
        ...

    def list_jobs(self) -> list[str]:
        """Names of the jobs present under the base, in any hierarchy."""
        ...

    def problems(self) -> list[str]:
        """What prevents creating jobs here, each with a fix hint (for `jigcmd doctor`)."""
        ...

    def pins(self) -> list[tuple[int, ...]]:
        """The CPU pins of the jobs under the base now, as their cpusets say (jobs not pinned
        by a cpuset of their own, and every job where the host offers no cpuset: none)."""
        ...

    def cpuset_bound(self) -> tuple[str, tuple[int, ...]] | None:
        """The CPUs the base's cpuset lets its jobs use and the file that says so (the base's
        effective set, its nearest ancestor's before the base is made); None: no cpuset."""
        ...


def check_job_name(name: str) -> None:
    """Refuse a job name that is not one `jigcmd…` path component."""
    if not _JOB_NAME.fullmatch(name):
        raise ValueError(
            f"cgroup job name {name!r} must match {_JOB_NAME.pattern} (one path component)"
        )


def is_job_name(name: str) -> bool:
    """Whether a directory name is one of our job names."""
    return _JOB_NAME.fullmatch(name) is not None
