"""Which host CPUs an envelope is pinned to: as many as its quota pays for, spread by slot.

Runtimes size their thread pools from the CPU count they read (Bun's and JSC's helpers, a
test suite's workers): on a 64-CPU host an envelope with half a core would start dozens of
threads against its 64-task limit. The envelope is therefore pinned to `width` CPUs, the
quota rounded up to whole CPUs (one for half a core). Concurrent envelopes hold distinct
envelope slots (`jigcmd.journal.reservations`, shared by every jigcmd using one state
directory), so slot `i` takes the `i`-th run of `width` CPUs of the server's own affinity
set, wrapping round: distinct slots get distinct CPUs while there are CPUs enough, and share
evenly once there are more slots than CPUs. This module decides; the envelope only applies
what the plan says (`RunPlan.cpus`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Collection

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
    limits: Limits, slot: int | None, allowed: Collection[int] | None = None
) -> tuple[int, ...]:
    """The CPUs for the envelope holding `slot`, out of `allowed` (default: this process's)."""
    pool = sorted(os.sched_getaffinity(0) if allowed is None else allowed)
    if not pool:
        raise ValueError("no CPU is allowed to this process")
    width = quota_width(limits)
    if width is None or width >= len(pool):
        return tuple(pool)
    position = next(_UNSLOTTED) if slot is None else slot
    start = position * width
    return tuple(sorted(pool[(start + k) % len(pool)] for k in range(width)))
