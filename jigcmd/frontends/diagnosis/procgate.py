"""The procfs check the doctor reports and every front's start refuses on.

jigcmd reads more of /proc than processes: the boot id names each process in the journal
(`journal.identity`), the free memory sizes the default slots, and the envelope reads
/proc/sys. A /proc mounted with `subset=pid` has none of them, and each front failed on
the first it met, blaming something else.
"""

from __future__ import annotations

import os

from jigcmd.envelope.cgroups.mounts import read_mounts
from jigcmd.frontends.diagnosis.verdicts import Check

__all__ = ["ProcUnavailable", "proc_verdict", "refuse_partial_proc"]

NAME = "procfs"
# What jigcmd itself reads beyond /proc/<pid>: the journal's boot id, the slots' estimate.
_NEEDED = ("/proc/sys/kernel/random/boot_id", "/proc/meminfo")
_FIX = (
    "start jigcmd where /proc is a full procfs (mounted without subset=pid; hidepid= is "
    "fine): under systemd, drop ProcSubset=pid from the unit"
)


class ProcUnavailable(OSError):
    """Raised at a front's start when /proc lacks what jigcmd reads there; says the fix."""


def proc_verdict() -> Check:
    """Whether /proc shows the files jigcmd reads, naming `subset=pid` when that hides them."""
    missing = [path for path in _NEEDED if not os.path.exists(path)]
    if not missing:
        return Check(NAME, "ok", "/proc shows the boot id, /proc/meminfo and /proc/sys")
    return Check(NAME, "FAIL", f"{_why()}: no {', '.join(missing)}", _FIX)


def refuse_partial_proc() -> None:
    """Raise `ProcUnavailable` (the doctor's words and fix) when /proc is not a full procfs."""
    verdict = proc_verdict()
    if not verdict.ok:
        raise ProcUnavailable(f"{verdict.detail}; fix: {verdict.hint}")


def _why() -> str:
    """How /proc is mounted, as far as its own mount table says."""
    try:
        mounts = [mount for mount in read_mounts() if mount.point == "/proc"]
    except OSError:
        mounts = []
    if mounts and "subset=pid" in mounts[-1].super_options:
        return "/proc is mounted with subset=pid (processes only)"
    if mounts and mounts[-1].fstype != "proc":
        return f"/proc is a {mounts[-1].fstype} mount, not procfs"
    return "/proc is not a full procfs"
