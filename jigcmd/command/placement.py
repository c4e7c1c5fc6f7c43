"""Which host CPUs an envelope is pinned to: as many as its quota pays for, the least used.

Runtimes size their thread pools from the CPU count they read (Bun's and JSC's helpers, a
test suite's workers): on a 64-CPU host an envelope with half a core would start dozens of
threads against its 64-task limit. The envelope is therefore pinned to `width` CPUs, the
quota rounded up to whole CPUs (one for half a core), out of the server's own affinity set
that the cgroup base's cpuset also gives its jobs (a job's cpuset cannot name a CPU its
parent lacks: the kernel refuses the write).

Which ones: the run of `width` CPUs that the live envelopes use least. The record of what
they use is the kernel's: the cpusets of the jobs under the cgroup base (`CgroupBackend.pins`),
which every jigcmd of this host and user shares whatever its state directory. Ties go to
the run that the envelope slot (`jigcmd.journal.reservations`, shared through one state
directory) points at, so that where no cpuset records anything (an affinity-only host)
concurrent slots still take distinct CPUs while there are CPUs enough, and share evenly once
there are more slots than CPUs. This module decides; the envelope applies what the plan says
(`RunPlan.cpus`).
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from jigcmd.errors import Code, JigError
from jigcmd.plan import Limits

__all__ = ["Placement", "pinned_cpus", "placeable_cpus", "quota_width"]

# Runs without a slot (no state directory) still spread: consecutive runs of one process take
# consecutive positions, and different processes start at different ones.
_UNSLOTTED = itertools.count(os.getpid())


def quota_width(limits: Limits) -> int | None:
    """How many whole CPUs the quota pays for (at least one); None when it is unlimited."""
    if limits.cpu_quota_us <= 0 or limits.cpu_period_us <= 0:
        return None
    return max(1, -(-limits.cpu_quota_us // limits.cpu_period_us))


def placeable_cpus(
    bound: tuple[str, Collection[int]] | None, own: Collection[int] | None = None
) -> tuple[int, ...]:
    """The CPUs an envelope may be placed on: this process's (`own`, default its affinity)
    that the cgroup base's cpuset also gives its jobs (`bound`: the file saying so and its
    CPUs; None: no cpuset). A job's cpuset cannot name a CPU its parent lacks."""
    mine = sorted(os.sched_getaffinity(0) if own is None else own)
    if bound is None:
        return tuple(mine)
    where, cpus = bound
    both = tuple(cpu for cpu in mine if cpu in set(cpus))
    if not both:
        raise JigError(
            Code.EXECUTION_FAILED,
            f"no CPU to place the envelope on: the cgroup base's cpuset ({where}) gives its "
            f"jobs CPUs {_cpu_text(cpus)}, and this process may run on CPUs {_cpu_text(mine)} "
            f"only; nothing ran. Give the base's cpuset.cpus a CPU this process may run on, "
            f"or start jigcmd on the base's CPUs (taskset -c {_cpu_text(cpus)} jigcmd …)",
        )
    return both


def _cpu_text(cpus: Collection[int]) -> str:
    """CPUs as the kernel lists them, without ranges: `1,3`."""
    return ",".join(str(cpu) for cpu in sorted(cpus))


def pinned_cpus(
    limits: Limits,
    slot: int | None,
    allowed: Collection[int] | None = None,
    busy: Iterable[Collection[int]] = (),
) -> tuple[int, ...]:
    """The CPUs for the envelope holding `slot`, out of `allowed` (default: this process's),
    given the pins `busy` of the envelopes alive now."""
    pool = sorted(os.sched_getaffinity(0) if allowed is None else allowed)
    if not pool:
        raise ValueError("no CPU is allowed to this process")
    width = quota_width(limits)
    if width is None or width >= len(pool):
        return tuple(pool)
    load = Counter(cpu for pin in busy for cpu in pin)
    position = next(_UNSLOTTED) if slot is None else slot
    n = len(pool)
    # Every run of `width` consecutive CPUs (wrapping round), the slot's own first.
    starts = [(position * width + offset) % n for offset in range(n)]
    best = min(starts, key=lambda start: sum(load[pool[(start + k) % n]] for k in range(width)))
    return tuple(sorted(pool[(best + k) % n] for k in range(width)))


def _no_cpuset() -> tuple[str, tuple[int, ...]] | None:
    return None


@dataclass(frozen=True)
class Placement:
    """What placing reads, each time: the live envelopes' pins and the CPUs the cgroup base's
    cpuset gives its jobs (the backend's `pins` and `cpuset_bound`; by default, neither)."""

    pins: Callable[[], list[tuple[int, ...]]] = list
    bound: Callable[[], tuple[str, tuple[int, ...]] | None] = _no_cpuset

    def place(self, limits: Limits, slot: int | None) -> tuple[int, ...]:
        """The CPUs for a run holding `slot`: its quota's worth, the least used by live
        envelopes, out of those this process and the base's cpuset both allow."""
        try:
            busy = self.pins()
        except OSError:
            # No record to read is no reason to refuse: the slot still spreads the runs.
            busy = []
        return pinned_cpus(limits, slot, placeable_cpus(self.bound()), busy)
