"""The run-time choice of a cgroup backend from the mount table.

Each backend is imported only when it is chosen: cgroupspy (v1's adapter) is then loaded
only where v1 is mounted, and the zygote's image carries one backend, not both.
"""

from __future__ import annotations

import os

from jigcmd.envelope.cgroups.model import V1_CONTROLLERS, CgroupBackend, CgroupUnavailable
from jigcmd.envelope.cgroups.mounts import read_mounts

__all__ = ["detect"]


def detect(
    root: str = "/sys/fs/cgroup",
    base: str = "jigcmd",
    *,
    mountinfo: str = "/proc/self/mountinfo",
) -> CgroupBackend:
    """The backend for the cgroup layout mounted at `root`.

    `base` is the jobs' parent: a path relative to each hierarchy's root, or, on v2, an
    absolute directory inside the cgroup2 mount (a delegated subtree, for rootless use).
    """
    root = os.path.normpath(root)
    under = [m for m in read_mounts(mountinfo) if m.point == root or m.point.startswith(root + "/")]
    # The last mount at a point is the visible one.
    by_point = {m.point: m for m in under}
    top = by_point.get(root)
    if top is not None and top.fstype == "cgroup2":
        from jigcmd.envelope.cgroups.v2 import V2Backend  # noqa: PLC0415 - see the docstring

        base_path = base if os.path.isabs(base) else os.path.join(root, base)
        return V2Backend(root, os.path.normpath(base_path))

    hierarchies: dict[str, str] = {}
    unified: str | None = None
    for mount in by_point.values():
        if mount.fstype == "cgroup":
            for controller in sorted(mount.super_options & V1_CONTROLLERS):
                hierarchies.setdefault(controller, mount.point)
        elif mount.fstype == "cgroup2" and unified is None:
            unified = mount.point
    if not hierarchies:
        raise CgroupUnavailable(
            f"no cgroup hierarchy is mounted at {root}; mount cgroup2 there "
            "(mount -t cgroup2 none /sys/fs/cgroup) or pass the right root"
        )
    if os.path.isabs(base):
        raise ValueError(
            f"on cgroup v1 the jobs' base must be relative to each hierarchy: {base!r}"
        )
    from jigcmd.envelope.cgroups.v1 import V1Backend  # noqa: PLC0415 - see the docstring

    return V1Backend(hierarchies, base, unified)
