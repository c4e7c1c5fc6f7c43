"""A pure-v2 cgroup a user delegates into: whether it can be used, and the steps that make one.

The fronts' refusal (`delegation`) and the doctor's delegation line both read these, so they
name the same cause: a read-only cgroup2 mount (no ownership helps), a directory chowned
without -R (its `cgroup.procs` stays root's, so jigcmd cannot move itself into its leaf), and,
on a host without systemd, the cgroupfs steps instead of a `systemd-run` that does not exist.
"""

from __future__ import annotations

import os
import posixpath
import shlex
from collections.abc import Callable

from jigcmd.envelope.cgroups import CgroupBackend
from jigcmd.envelope.cgroups.v1 import V1Backend
from jigcmd.envelope.cgroups.v2 import V2Backend

__all__ = [
    "cgroupfs_fix",
    "chowned_without_r",
    "read_only",
    "read_only_fix",
    "read_only_mount",
    "read_only_reason",
    "unwritable_files",
]

# What jigcmd writes in its delegated cgroup: its move into the leaf, the jobs' controllers.
_DELEGATED_FILES = ("cgroup.procs", "cgroup.subtree_control")


def read_only_fix(mount: str) -> str:
    """How to make a read-only cgroup mount writable where jigcmd runs."""
    return (
        f"remount it read-write where jigcmd runs (as root: mount -o remount,rw {mount}); a "
        "container needs its cgroup mount bound writable"
    )


def read_only(directory: str) -> bool:
    """Whether the mount holding `directory` is read-only; False when it cannot be looked at."""
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def read_only_mount(backend: CgroupBackend) -> str | None:
    """The first cgroup mount the backend's jobs write that is read-only (None: all writable)."""
    if isinstance(backend, V2Backend):
        mounts = [backend.mount]
    elif isinstance(backend, V1Backend):
        # Only what the jobs write: an unused hierarchy, or a cpuset they go without, may be
        # read-only on a host where every job succeeds.
        mounts = backend.job_mounts()
    else:
        return None
    return next((mount for mount in mounts if read_only(mount)), None)


def read_only_reason(directory: str) -> str:
    """Why a cgroup on a read-only mount is nobody's to use, whoever owns it."""
    return (
        f"the cgroup mount holding {directory} is read-only: no process may create a cgroup "
        "or move one into it there, whoever owns the directory"
    )


def unwritable_files(directory: str) -> list[str]:
    """The files of a delegated cgroup jigcmd writes that this process may not write (one
    that is absent is no cgroup's: not judged here)."""
    paths = [(name, posixpath.join(directory, name)) for name in _DELEGATED_FILES]
    return [name for name, path in paths if os.path.exists(path) and not os.access(path, os.W_OK)]


def chowned_without_r(directory: str, files: list[str], uid: int) -> tuple[str, str]:
    """(why, fix) for a delegated directory whose files stayed another user's."""
    named = " and ".join(files)
    return (
        f"{directory} is uid {uid}'s but its {named} {'is' if len(files) == 1 else 'are'} not "
        "(the directory was chowned without -R): jigcmd could not move itself into a leaf "
        "nor give its jobs controllers there",
        f"as root: chown -R {uid} {shlex.quote(directory)}",
    )


def cgroupfs_fix(
    root: str,
    uid: int,
    parent: tuple[int, str],
    movable: bool,
    *,
    as_root: Callable[[str], str],
    started: str,
    command: str,
) -> str:
    """The steps that delegate a cgroup without systemd, then how to start `command` in it.

    `parent` (pid, command name) is the process that started `started`: moved when
    `movable` (`delegation.movable_parent`: not a wrapper that ends with it). The last step
    is `exec`: a shell left beside jigcmd in the cgroup would make jigcmd refuse to share it
    (the no-internal-process rule).
    """
    pid, name = parent
    leaf = shlex.quote(posixpath.join(root, f"jigcmd-u{uid}"))
    steps = (
        f"echo +memory +pids +cpu > {shlex.quote(root)}/cgroup.subtree_control; "
        f"mkdir -p {leaf} && chown -R {uid} {leaf} && echo {pid if movable else 'PID'} > "
        f"{leaf}/cgroup.procs"
    )
    named = f"pid {pid}{f' ({name})' if name else ''}"
    whose = (
        f"pid {pid} is the process that ran {started}"
        if movable
        else f"PID being the shell that starts jigcmd: {started}'s parent, {named}, ends with it"
    )
    return (
        f"delegate a cgroup and start jigcmd inside it: {as_root(steps)} ({whose}); then, "
        f"from that shell, `exec {command}`, so that jigcmd is the cgroup's only process"
    )
