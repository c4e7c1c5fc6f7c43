"""Which of a policy's host directories hold a mount, which no run could then be shown. Pure.

A run sees each host directory through a bind made inside the envelope's user namespace,
and the kernel refuses to bind a directory holding a mount that came from a more privileged
namespace (what the mount hides would show). A container's `/etc` usually holds such
mounts (podman and docker mount `/etc/hostname`, `/etc/hosts` and `/etc/resolv.conf`
there), and with such a directory in `host_dirs` every allowed run would fail: jarvis
refuses to start instead, saying which.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

__all__ = ["CONTAINER_SAFE_HOST_DIRS", "held_mounts", "held_mounts_message"]

# The system directories a run needs, none of which an engine mounts anything below.
CONTAINER_SAFE_HOST_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64")


def held_mounts(
    host_dirs: Iterable[str], mount_points: Sequence[str], realpath: Callable[[str], str]
) -> list[tuple[str, str]]:
    """(host directory, the first mount point strictly below it) for each that holds one;
    a symlinked directory is judged at its real path, which is what a run is shown."""
    found = []
    for directory in host_dirs:
        inside = realpath(directory).rstrip("/") + "/"
        below = sorted(point for point in mount_points if point.startswith(inside))
        if below:
            found.append((directory, below[0]))
    return found


def held_mounts_message(source: str, held: Sequence[tuple[str, str]]) -> str:
    """One line naming each directory, the mount below it, and the fix."""
    named = "; ".join(f"{directory} holds a mount ({point})" for directory, point in held)
    safe = ", ".join(f'"{path}"' for path in CONTAINER_SAFE_HOST_DIRS)
    return (
        f"{source}: host_dirs: {named}, and the kernel binds a directory only with the mounts "
        "inside it, which a run is never shown: every run would fail. Narrow host_dirs to "
        f"directories that hold no mount, e.g. host_dirs = [{safe}] (container engines "
        "mount the hostname, hosts and resolv.conf in /etc)"
    )
