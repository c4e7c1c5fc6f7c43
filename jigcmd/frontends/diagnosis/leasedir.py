"""The host-id lease directory as the doctor judges it: the fix for a refused one, and
whether a container's `/run/jigcmd` is the host's (a mount) or the container's own.

hostids.py refuses a lease directory it cannot make, or that is not root's alone; the fix
depends on why: a read-only root (`--tmpfs /run`), another owner or a wide mode (`chown`,
`chmod`), or a user namespace's root facing the host's root-owned directory (bound into a
rootless container), which it never owns.
"""

from __future__ import annotations

import os
import stat

from jigcmd.frontends.diagnosis.probes import read_text

__all__ = ["refused_fix", "shared_from_host"]

_SECTION = 'docs/deployment.md, "Host ids in a container"'
_LEASE_MOUNTS = ("/run/jigcmd", "/run/jigcmd/hostids")


def refused_fix(path: str) -> str:
    """How to make `path`, the component hostids.py refused, one a lease trusts."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return _unmade_fix(path)
    except OSError as exc:
        return f"make {path} a directory root can open ({exc.strerror})"
    if _read_only(path):
        return _READ_ONLY_FIX.format(where=path)
    if not stat.S_ISDIR(info.st_mode):
        return f"as root: rm {path} && install -d -m 0755 {path}"
    if info.st_uid != os.geteuid() and info.st_uid == _overflow_uid():
        # Owned by an id this user namespace does not map: the host's, bound in.
        return (
            f"{path} is owned by no id of this user namespace (the host's root-owned "
            "directory bound into a container with a user namespace?): bind one the "
            "container's root owns, mode 0755 (a directory of the user's own), or none "
            f"({_SECTION})"
        )
    steps = []
    if info.st_uid != os.geteuid():
        steps.append(f"chown {os.geteuid()}:{os.getegid()} {path}")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        steps.append(f"chmod 0755 {path}")
    return "as root: " + " && ".join(steps or [f"chmod 0755 {path}"])


_READ_ONLY_FIX = (
    "{where} is on a read-only filesystem: give the container a /run of its own "
    "(--tmpfs /run) or the host's shared directory (-v /run/jigcmd:/run/jigcmd; " + _SECTION + ")"
)


def _unmade_fix(path: str) -> str:
    parent = os.path.dirname(path) or "/"
    if _read_only(parent):
        return _READ_ONLY_FIX.format(where=parent)
    return f"as root: install -d -m 0755 {path}"


def _read_only(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _overflow_uid() -> int:
    """The uid an unmapped owner shows as (65534 unless the host set it otherwise)."""
    text = (read_text("/proc/sys/kernel/overflowuid") or "").strip()
    return int(text) if text.isdigit() else 65534


def shared_from_host(mountinfo: str) -> bool:
    """Whether /proc/self/mountinfo's text has a mount at /run/jigcmd or /run/jigcmd/hostids."""
    for line in mountinfo.splitlines():
        fields = line.split()
        # Field 5 is the mount point (octal escapes for spaces: none in these paths).
        if len(fields) > 4 and fields[4] in _LEASE_MOUNTS:
            return True
    return False
