"""One typed interface over the cgroup backends, and the run-time choice between them.

`detect()` reads the mount table and returns a `CgroupBackend`: v2 (plain files, see
`v2`), v1 (cgroupspy, see `v1`) or hybrid (v1 controllers plus the unified
cgroup2 hierarchy for whole-tree kill and CPU time). Jobs live under a parent directory
(`base`, by default `jigcmd`) in each hierarchy, one directory per single-use envelope.
"""

from __future__ import annotations

from jigcmd.envelope.cgroups.detection import detect
from jigcmd.envelope.cgroups.files import join
from jigcmd.envelope.cgroups.model import (
    V1_CONTROLLERS,
    CgroupBackend,
    CgroupJob,
    CgroupStats,
    CgroupUnavailable,
    Membership,
    Mode,
    check_job_name,
    is_job_name,
)
from jigcmd.envelope.cgroups.mounts import Mount, read_mounts
from jigcmd.envelope.cgroups.v1 import delegated_hierarchies

__all__ = [
    "V1_CONTROLLERS",
    "CgroupBackend",
    "CgroupJob",
    "CgroupStats",
    "CgroupUnavailable",
    "Membership",
    "Mode",
    "Mount",
    "check_job_name",
    "delegated_hierarchies",
    "detect",
    "is_job_name",
    "join",
    "read_mounts",
]
