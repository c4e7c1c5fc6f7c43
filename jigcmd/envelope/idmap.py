"""Who the envelope's uid/gid 0 is on the host: 65534 as root, the server's own ids without root."""

from __future__ import annotations

import os

__all__ = ["HOST_ID", "INSIDE_ID", "host_ids", "map_ids", "rootless", "write_id_maps"]

# Inside the user namespace, uid/gid 0 is host 65534: unprivileged on the host.
HOST_ID = 65534
# The uid and gid pid 1 and the candidate have inside it (the envelope's /etc names them).
INSIDE_ID = 0


def rootless() -> bool:
    """Whether this process builds envelopes without host root."""
    return os.geteuid() != 0


def host_ids() -> tuple[int, int]:
    """The host uid and gid that the namespace's 0 maps to."""
    # Without root, the kernel lets a process map exactly its own ids (and its gid only after
    # setgroups is denied); the candidate then runs as the server's user on the host.
    return (HOST_ID, HOST_ID) if not rootless() else (os.geteuid(), os.getegid())


def write_id_maps(pid: int) -> None:
    """Write the single-id uid and gid maps of the user namespace of `pid` (raises OSError)."""
    map_ids(str(pid), inside=(INSIDE_ID, INSIDE_ID), outside=host_ids())


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
