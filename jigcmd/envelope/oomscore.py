"""The candidate's OOM score: the OOM killer's first choice, never pid 1 or the host's.

Pid 1 starts the candidate with `posix_spawn`, so nothing runs in the candidate before Bun
to set its score: it inherits pid 1's at the spawn. Pid 1 therefore holds 1000 only across
the spawn and goes back to its own value right after, when Bun has not allocated anything
yet. Who moves pid 1's score depends on who can fix it as a floor (`oom_score_adj_min`,
which the kernel sets only for a writer holding `CAP_SYS_RESOURCE` over the host):

- pinned (host root with the capability): the supervisor writes 1000 into pid 1 once the
  envelope is prepared, and pid 1's candidate inherits value and floor; after the spawn the
  supervisor writes pid 1's own value back (lowering needs the capability too).
- not pinned (no such writer exists: rootless, or root without the capability, as in
  Docker's default set): pid 1 raises its own score through a descriptor it opened while it
  was still dumpable (a non-dumpable process's /proc files belong to host root), and lowers
  it back to the floor it inherited; the candidate could lower its own as far, as before.
"""

from __future__ import annotations

import os

from jigcmd.envelope import idmap, privileges

__all__ = ["CANDIDATE", "PINNED", "open_own", "set_via", "write"]

CANDIDATE = b"1000"
_CAP_SYS_RESOURCE = 24
# Decided once, in the zygote (every envelope process is a fork of it).
PINNED = not idmap.rootless() and privileges.effective_capability(_CAP_SYS_RESOURCE)


def open_own() -> tuple[int, bytes]:
    """A write descriptor for the calling process's own score, and the score it has now.

    Call it while the process is still dumpable: the permission is checked at the open.
    """
    fd = os.open("/proc/self/oom_score_adj", os.O_RDWR | os.O_CLOEXEC)
    try:
        value = os.read(fd, 32).strip() or b"0"
    except OSError:
        os.close(fd)
        raise
    return fd, value


def set_via(fd: int, value: bytes) -> None:
    """Write `value` through a descriptor from `open_own`."""
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, value)


def write(pid: int, value: bytes) -> None:
    """Write process `pid`'s score (a floor too when the writer holds CAP_SYS_RESOURCE)."""
    fd = os.open(f"/proc/{pid}/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value)
    finally:
        os.close(fd)
