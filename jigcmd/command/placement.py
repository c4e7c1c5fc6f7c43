"""Which host CPUs an envelope is pinned to: as many as its quota pays for, the least used.

Runtimes size their thread pools from the CPU count they read (Bun's and JSC's helpers, a
test suite's workers): on a 64-CPU host an envelope with half a core would start dozens of
threads against its 64-task limit. The envelope is therefore pinned to `width` CPUs, the
quota rounded up to whole CPUs (one for half a core), out of the server's own affinity set.

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
from collections.abc import Collection, Iterable

from jigcmd.plan import Limits

__all__ = ["pinned_cpus", "quota_width"]

# Runs without a slot (no state directory) still spread: consecutive runs of one process take
# consecutive positions, and different processes start at different ones.
_UNSLOTTED = itertools.count(os.getpid())


def quota_width(limits: Limits) -> int | None:
    """How many whole CPUs the quota pays for (at least one); None when it is unlimited."""
    if limits.cpu_quota_us <= 0 or limits.cpu_period_us <= 0:
        return None
    return max(1, -(-limits.cpu_quota_us // limits.cpu_period_us))


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
