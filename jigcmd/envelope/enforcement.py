"""What every envelope enforces beyond its plan: its namespaces, seccomp filter and mode.

The run's own limits and CPU pin are in its plan; these are the same for every envelope this
process builds (the filter is the one pid 1 installs before exec, assembled by the same code;
rootless is decided by the effective uid the supervisors inherit from this process).
"""

from __future__ import annotations

import functools
import hashlib

from jigcmd.envelope import idmap, seccomp

__all__ = ["NAMESPACES", "rootless", "seccomp_filter_sha256"]

# pid 1 is cloned into the first six (see spawning.py); it makes the cgroup namespace itself.
NAMESPACES = ("user", "mount", "pid", "ipc", "uts", "net", "cgroup")


@functools.cache
def seccomp_filter_sha256() -> str:
    """The hex SHA-256 of the candidate's seccomp program for this machine, as installed."""
    return hashlib.sha256(seccomp.build_filter()).hexdigest()


def rootless() -> bool:
    """Whether this process builds envelopes without host root."""
    return idmap.rootless()
