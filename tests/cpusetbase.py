"""A cgroup base `jigcmd-cpuset-…` whose v1 cpuset is narrower than this process's affinity."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

from jigcmd.envelope import cgroups
from tests.required import require_root, unavailable

__all__ = ["narrow_cpuset_base"]

ROOT = Path("/sys/fs/cgroup")


def narrow_cpuset_base() -> Iterator[tuple[str, int]]:
    """A cgroup base `jigcmd-…` whose v1 cpuset holds only the last CPU of this process's
    affinity, and that CPU; every hierarchy's base is removed afterwards."""
    require_root()
    try:
        mode = cgroups.detect().mode
    except (OSError, ValueError) as exc:
        unavailable(f"no cgroup hierarchy: {exc}")
    own = sorted(os.sched_getaffinity(0))
    if mode == "v2" or not (ROOT / "cpuset" / "cpuset.cpus").exists():
        unavailable(f"a v1 cpuset hierarchy to narrow a base in ({mode} here)")
    if len(own) < 2:
        unavailable(f"two CPUs to narrow a base to one of (this process may use {own})")
    name = f"jigcmd-cpuset-{uuid.uuid4().hex[:8]}"
    cpuset = ROOT / "cpuset" / name
    cpuset.mkdir()
    try:
        (cpuset / "cpuset.cpus").write_text(str(own[-1]))
        (cpuset / "cpuset.mems").write_text((ROOT / "cpuset" / "cpuset.mems").read_text())
        yield name, own[-1]
    finally:
        # jigcmd removed its jobs as the run ended; the bases it made are ours to remove.
        for hierarchy in ROOT.iterdir():
            with contextlib.suppress(FileNotFoundError):
                (hierarchy / name).rmdir()
