"""Making pid 1: clone3 into fresh namespaces, born in the job's cgroup, and holding them.

As host root the zygote enters a fresh network namespace first, so that the host user
namespace owns it (see netns.py), clones pid 1 into the rest and returns to the host's.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable

from jigcmd.envelope import cgroups, idmap, netns
from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.failure import StepError

__all__ = ["close_all_but", "hold_namespaces", "spawn_init", "spawn_sibling"]

# What pid 1 is cloned into. The network namespace comes from the zygote as root (or
# with these, rootless); the cgroup namespace is made by pid 1 after it joined the job.
_NAMESPACES = (
    sc.CLONE_NEWUSER | sc.CLONE_NEWNS | sc.CLONE_NEWPID | sc.CLONE_NEWIPC | sc.CLONE_NEWUTS
)
_ROOTLESS = idmap.rootless()


def spawn_init(job: cgroups.CgroupJob, keep: tuple[int, ...]) -> tuple[int, str | None]:
    """Create pid 1 in fresh namespaces, born in the job's cgroup2 directory if there is one.

    Returns (its pid, or 0 in pid 1 itself; the cgroup2 directory it was born in or None).
    In pid 1 every descriptor of the zygote but stdio and `keep` is closed at once: it must
    hold no other envelope's sockets, pidfds or slot locks.
    As host root, the network namespace comes first and is made here, by the zygote, so
    that the host user namespace owns it: the candidate can never reconfigure it (see
    jigcmd.envelope.netns); the zygote then returns to the host's. Without root (a
    delegated cgroup subtree, unprivileged user namespaces) pid 1's user namespace owns it:
    pid 1 may configure it, the candidate (no capabilities) may not. The cgroup namespace is
    made by pid 1 once it joined every hierarchy, so that its root is the job.
    """
    return _in_fresh_network(_clone, 0, job.birth_dir, keep)


def spawn_sibling(birth_dir: str | None, keep: tuple[int, ...]) -> tuple[int, str | None]:
    """`spawn_init` with `CLONE_PARENT`: pid 1 is the caller's parent's child (the spawner's).

    No fallback here: OSError when the kernel refuses (clone(2) says `CLONE_PARENT` does not
    combine with `CLONE_NEWPID` or `CLONE_NEWUSER`; 6.18 accepts it), and the caller's parent
    then makes pid 1 itself (`spawn_init`).
    """
    return _in_fresh_network(_clone_born, sc.CLONE_PARENT, birth_dir, keep)


def _in_fresh_network(
    clone: Callable[[int, str | None], tuple[int, str | None]],
    flags: int,
    birth: str | None,
    keep: tuple[int, ...],
) -> tuple[int, str | None]:
    """`clone(namespace flags | flags, birth)` in a fresh network namespace, then back.

    Plain calls, not a context manager: pid 1 leaves this code on its first steps, and every
    object it touches on the way is a page it copies (docs/envelope.md, "Pid 1's steps, one
    by one"). In pid 1 every descriptor but stdio and `keep` is closed at once.
    """
    namespaces, host_net = _enter_fresh_network()
    try:
        pid, born_in = clone(namespaces | flags, birth)
    except BaseException:
        _leave(host_net)
        raise
    if pid == 0:
        close_all_but(keep)
    else:
        _leave(host_net)
    return pid, born_in


def _enter_fresh_network() -> tuple[int, int]:
    """Into a fresh network namespace (as host root) for the clone: the flags to clone with,
    and the host's namespace for `_leave` (-1: none was entered).

    The caller goes back after the clone (`_leave`); pid 1 (the child) stays.
    """
    if _ROOTLESS:
        return _NAMESPACES | sc.CLONE_NEWNET, -1
    try:
        _drop_groups()
    except OSError as exc:
        # Its own step: without CAP_SETGID this fails, and the netns step was blamed for it.
        raise StepError("drop supplementary groups", exc) from exc
    host_net = -1
    try:
        host_net = netns.host_namespace()
        netns.enter_fresh()
    except OSError as exc:
        if host_net >= 0:
            with contextlib.suppress(OSError):
                sc.setns(host_net, sc.CLONE_NEWNET)
        raise refused_namespaces("network namespace", exc) from exc
    return _NAMESPACES, host_net


def _leave(host_net: int) -> None:
    """Back into the host's network namespace after `_enter_fresh_network` (the parent only)."""
    if host_net >= 0:
        sc.setns(host_net, sc.CLONE_NEWNET)


def _clone_born(flags: int, birth: str | None) -> tuple[int, str | None]:
    """clone3, born in the cgroup2 directory `birth` when it can be; OSError if refused.

    Returns (the pid, or 0 in the child; the directory it was born in or None).
    """
    cgroup_fd = -1
    if birth is not None:
        with contextlib.suppress(OSError):
            cgroup_fd = os.open(birth, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if cgroup_fd >= 0:
            # Refused (a delegation quirk): pid 1 moves itself, slower.
            with contextlib.suppress(OSError):
                return sc.clone(flags, cgroup_fd), birth
        return sc.clone(flags), None
    finally:
        if cgroup_fd >= 0:
            os.close(cgroup_fd)


def _clone(flags: int, birth: str | None) -> tuple[int, str | None]:
    try:
        return _clone_born(flags, birth)
    except OSError as exc:
        if exc.errno not in (errno.ENOSYS, errno.EPERM):
            raise refused_namespaces("create namespaces", exc) from exc
    # clone3 hidden (container seccomp profiles answer ENOSYS or EPERM): the old way.
    try:
        return _fork_after_unshare(flags), None
    except OSError as exc:
        raise refused_namespaces("create namespaces", exc) from exc


def refused_namespaces(step: str, exc: OSError) -> StepError:
    """The step's error; ENOSPC said as what it is here, a count reached, not a full disk."""
    if exc.errno != errno.ENOSPC:
        return StepError(step, exc)
    return StepError(
        step,
        f"{exc.strerror}: a namespace limit is reached (a user.max_*_namespaces count of this "
        "user, held by every process that has one open, or namespaces nested too deep), "
        "not a full disk",
    )


_groups_dropped = False


def _drop_groups() -> None:
    """Clear the zygote's supplementary groups, once: every pid 1 is cloned without them.

    Host root's group 0 would otherwise survive into the user namespace.
    """
    global _groups_dropped  # noqa: PLW0603 - the zygote's own credentials, changed once
    if not _groups_dropped:
        os.setgroups([])
        _groups_dropped = True


def close_all_but(keep: tuple[int, ...]) -> None:
    """Close every descriptor above 2 that is not in `keep`."""
    low = 3
    for fd in sorted(k for k in keep if k >= low):
        if fd > low:
            sc.close_range(low, fd - 1)
        low = fd + 1
    sc.close_range(low, 0xFFFFFFFF)


def hold_namespaces(init: int) -> dict[str, int]:
    """Descriptors of pid 1's namespaces by kind, so that its exit does not tear them down.

    The last reference to a namespace frees it in the exiting process: the mount namespace
    unmounts its tree and waits for an RCU grace period, and pid 1's exit (which the answer
    waits for) took 1.68 ms with all of them against 1.33 ms with them held elsewhere
    (a forked zygote-sized process, 15 tmpfs mounts, median of 12). Holding them moves that
    work after the answer: by then the cgroup is confirmed empty and removed, so no process
    is left in them, only memory (the candidate tree, the scratch), freed when they close.
    """
    held: dict[str, int] = {}
    try:
        directory = os.open(f"/proc/{init}/ns", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return held
    try:
        for kind in ("mnt", "net", "ipc", "uts", "pid", "cgroup", "user"):
            with contextlib.suppress(OSError):
                held[kind] = os.open(kind, os.O_RDONLY | os.O_CLOEXEC, dir_fd=directory)
    finally:
        os.close(directory)
    return held


def _fork_after_unshare(flags: int) -> int:
    """Make pid 1 without clone3: a middle process unshares `flags` and forks it, then exits.

    Returns pid 1's host pid, or 0 in pid 1 itself. Only the first fork after
    unshare(CLONE_NEWPID) lands in the new pid namespace; the middle process reports that
    child's pid and exits, and pid 1 is reparented to the zygote (its subreaper).
    """
    report_r, report_w = os.pipe2(os.O_CLOEXEC)
    middle = os.fork()
    if middle == 0:
        os.close(report_r)
        try:
            sc.unshare(flags)
            pid = os.fork()
        except BaseException:  # noqa: BLE001 - a forked process: whatever fails, it cleans up and exits
            os._exit(1)
        if pid == 0:
            os.close(report_w)
            return 0
        os.write(report_w, str(pid).encode())
        os._exit(0)
    os.close(report_w)
    try:
        reported = os.read(report_r, 32)
    finally:
        os.close(report_r)
        os.waitpid(middle, 0)
    if not reported:
        raise OSError(errno.ECHILD, "the process making pid 1 failed (unshare or fork)")
    return int(reported)
