"""Writing the envelope's user namespace maps: its uid/gid 0 is one host uid and gid.

Which host ids those are (one leased per envelope as root, the server's own without root)
is `hostids.py`'s choice.
"""

from __future__ import annotations

import os

__all__ = ["INSIDE_ID", "map_ids", "rootless", "write_id_maps"]

# The uid and gid pid 1 and the candidate have inside it (the envelope's /etc names them).
INSIDE_ID = 0


def rootless() -> bool:
    """Whether this process builds envelopes without host root."""
    return os.geteuid() != 0


def write_id_maps(pid: int, host: tuple[int, int]) -> None:
    """Map the user namespace of `pid`'s 0 to host uid and gid `host` (raises OSError)."""
    map_ids(str(pid), inside=(INSIDE_ID, INSIDE_ID), outside=host)


def map_ids(process: str, *, inside: tuple[int, int], outside: tuple[int, int]) -> None:
    """Map one uid and one gid (`inside` ← `outside`) in `/proc/<process>`'s user namespace.

    setgroups is denied first where it must be: without it an unprivileged writer may not
    write a gid map.
    """
    for name, text in (
        ("uid_map", f"{inside[0]} {outside[0]} 1\n"),
        ("setgroups", "deny\n"),
        ("gid_map", f"{inside[1]} {outside[1]} 1\n"),
    ):
        # One write each: the kernel takes a map in a single write(2) only.
        fd = os.open(f"/proc/{process}/{name}", os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, text.encode("ascii"))
        finally:
            os.close(fd)
