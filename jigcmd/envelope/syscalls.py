"""Thin ctypes bindings for the Linux system calls Python 3.11's `os` module lacks.

Every wrapper raises `OSError` with the real errno, so callers can word precise failures.
Only x86_64 and aarch64 are supported (syscall numbers below); `doctor` refuses others.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable
from typing import Any

__all__ = [
    "CLONE_NEWCGROUP",
    "CLONE_NEWIPC",
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWPID",
    "CLONE_NEWUSER",
    "CLONE_NEWUTS",
    "CLONE_PARENT",
    "CLOSE_RANGE_CLOEXEC",
    "MNT_DETACH",
    "MS_BIND",
    "MS_NODEV",
    "MS_NOEXEC",
    "MS_NOSUID",
    "MS_PRIVATE",
    "MS_RDONLY",
    "MS_REC",
    "MS_REMOUNT",
    "MS_SLAVE",
    "OPEN_TREE_CLONE",
    "RESOLVE_EXACT",
    "UMOUNT_NOFOLLOW",
    "clone",
    "close_range",
    "default_signal",
    "libc",
    "mount",
    "move_mount",
    "open_tree",
    "openat2",
    "pivot_root",
    "prctl",
    "prctl_raw",
    "set_name",
    "setns",
    "syscall_number",
    "typed",
    "umount2",
    "unshare",
]

libc = ctypes.CDLL(None, use_errno=True)

CLONE_PARENT = 0x00008000
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_SLAVE = 0x80000

MNT_DETACH = 0x2
UMOUNT_NOFOLLOW = 0x8
CLOSE_RANGE_CLOEXEC = 1 << 2
OPEN_TREE_CLONE = 1
AT_FDCWD = -100
# openat2's RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS: a path taken exactly as written.
RESOLVE_EXACT = 0x02 | 0x04

_SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "clone3": 435,
        "close_range": 436,
        "move_mount": 429,
        "open_tree": 428,
        "openat2": 437,
        "pivot_root": 155,
        "rt_sigaction": 13,
        "setns": 308,
        "unshare": 272,
    },
    "aarch64": {
        "clone3": 435,
        "close_range": 436,
        "move_mount": 429,
        "open_tree": 428,
        "openat2": 437,
        "pivot_root": 41,
        "rt_sigaction": 134,
        "setns": 268,
        "unshare": 97,
    },
}

CLONE_INTO_CGROUP = 0x200000000
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOVE_MOUNT_T_EMPTY_PATH = 0x40
_PR_SET_NAME = 15


class _CloneArgs(ctypes.Structure):
    """struct clone_args up to `cgroup` (CLONE_ARGS_SIZE_VER2, Linux 5.7)."""

    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("pidfd", ctypes.c_uint64),
        ("child_tid", ctypes.c_uint64),
        ("parent_tid", ctypes.c_uint64),
        ("exit_signal", ctypes.c_uint64),
        ("stack", ctypes.c_uint64),
        ("stack_size", ctypes.c_uint64),
        ("tls", ctypes.c_uint64),
        ("set_tid", ctypes.c_uint64),
        ("set_tid_size", ctypes.c_uint64),
        ("cgroup", ctypes.c_uint64),
    ]


class _OpenHow(ctypes.Structure):
    """struct open_how (openat2, Linux 5.6)."""

    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


# Called with the GIL held (PyDLL), so the child starts holding it, as after os.fork().
_libc_holding_gil = ctypes.PyDLL(None, use_errno=True)

# This machine's numbers, looked up once; empty on an architecture without a table.
_NUMBERS = _SYSCALLS.get(os.uname().machine, {})


def syscall_number(name: str) -> int:
    """The number of syscall `name` on this machine's architecture."""
    number = _NUMBERS.get(name)
    if number is None:
        machine = os.uname().machine
        if not _NUMBERS:
            raise OSError(f"unsupported architecture {machine!r}")
        raise OSError(f"no number for syscall {name!r} on {machine!r}")
    return number


# Every entry point is typed and resolved here, at import, in the zygote: a process cloned
# from it then only calls them. Resolving one on first use (`libc.mount`) made each pid 1
# look it up and store it anew, and each such write lands on a page it shares with the
# zygote: a copy-on-write fault per page (docs/envelope.md, "Pid 1's first faults").
# Arguments typed, Python ints convert in place, with no ctypes objects made per call.
def typed(name: str, restype: type, *argtypes: type) -> Callable[..., Any]:
    """libc's `name` as a prototype: typed arguments, errno kept (`ctypes.get_errno`)."""
    return ctypes.CFUNCTYPE(restype, *argtypes, use_errno=True)((name, libc))


_unshare = typed("unshare", ctypes.c_int, ctypes.c_int)
_setns = typed("setns", ctypes.c_int, ctypes.c_int, ctypes.c_int)
_mount = typed(
    "mount",
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
)
_umount2 = typed("umount2", ctypes.c_int, ctypes.c_char_p, ctypes.c_int)
# prctl(2) itself: -1 and errno on failure (`prctl` raises; privileges.py words its own errors).
prctl_raw = typed(
    "prctl",
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
)
# prctl(PR_SET_NAME) with the name as bytes, passed as a pointer to the bytes object's own
# buffer: a `create_string_buffer` of a length not seen before makes a new ctypes array type,
# ~30 copy-on-write faults in a cloned pid 1 (docs/envelope.md, "Pid 1's steps, one by one").
_prctl_name = typed("prctl", ctypes.c_int, ctypes.c_int, ctypes.c_char_p)
# syscall(2) is variadic; on x86_64 and aarch64 its integer arguments pass as fixed ones do.
_syscall_paths = typed("syscall", ctypes.c_long, ctypes.c_long, ctypes.c_char_p, ctypes.c_char_p)
_syscall_uints = typed(
    "syscall", ctypes.c_long, ctypes.c_long, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint
)
_syscall_at_path = typed(
    "syscall", ctypes.c_long, ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint
)
_syscall_openat2 = typed(
    "syscall",
    ctypes.c_long,
    ctypes.c_long,
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.c_void_p,
    ctypes.c_size_t,
)
_syscall_move = typed(
    "syscall",
    ctypes.c_long,
    ctypes.c_long,
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.c_uint,
)
_syscall_sigaction = typed(
    "syscall",
    ctypes.c_long,
    ctypes.c_long,
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_size_t,
)
_clone3 = _libc_holding_gil.syscall
_clone3.argtypes = (ctypes.c_long, ctypes.c_void_p, ctypes.c_size_t)
_clone3.restype = ctypes.c_long
# The interpreter's own fork hooks, as os.fork() runs them; resolved here for the same reason.
_before_fork = ctypes.pythonapi.PyOS_BeforeFork
_after_fork_child = ctypes.pythonapi.PyOS_AfterFork_Child
_after_fork_parent = ctypes.pythonapi.PyOS_AfterFork_Parent
for _hook in (_before_fork, _after_fork_child, _after_fork_parent):
    _hook.argtypes = ()
    _hook.restype = None
# One clone_args, filled in per call: its callers (the zygote, the spawner) are single-threaded.
_CLONE_ARGS = _CloneArgs()
_CLONE_ARGS_ADDRESS = ctypes.addressof(_CLONE_ARGS)
_CLONE_ARGS_SIZE = ctypes.sizeof(_CloneArgs)


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def unshare(flags: int) -> None:
    """unshare(2)."""
    _check(_unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    """setns(2)."""
    _check(_setns(fd, nstype), "setns")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    """mount(2)."""
    _check(
        _mount(
            source.encode() if source is not None else None,
            target.encode(),
            fstype.encode() if fstype is not None else None,
            flags,
            data.encode() if data is not None else None,
        ),
        f"mount {target}",
    )


def umount2(target: str, flags: int) -> None:
    """umount2(2)."""
    _check(_umount2(target.encode(), flags), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    """pivot_root(2), which glibc does not wrap."""
    _check(
        _syscall_paths(syscall_number("pivot_root"), new_root.encode(), put_old.encode()),
        "pivot_root",
    )


def open_tree(path: str, flags: int) -> int:
    """open_tree(2) (Linux 5.2) of `path`: with `OPEN_TREE_CLONE` a detached copy of its mount.

    The descriptor is close-on-exec. A copy keeps the mount flags it had when it was made:
    a later remount of the original does not reach it.
    """
    return _check(
        _syscall_at_path(
            syscall_number("open_tree"), AT_FDCWD, path.encode(), flags | os.O_CLOEXEC
        ),
        f"open_tree {path}",
    )


def openat2(path: str, flags: int, resolve: int) -> int:
    """openat2(2) (Linux 5.6) of `path` with `open_how.resolve` = `resolve`; close-on-exec.

    With `RESOLVE_EXACT` a symlink anywhere in `path` (its last component too) fails with
    ELOOP instead of being followed: what opens is what the path names as written.
    """
    how = _OpenHow(flags | os.O_CLOEXEC, 0, resolve)
    return _check(
        _syscall_openat2(
            syscall_number("openat2"),
            AT_FDCWD,
            path.encode(),
            ctypes.addressof(how),
            ctypes.sizeof(how),
        ),
        f"openat2 {path}",
    )


def move_mount(tree: int, target: int, where: str) -> None:
    """move_mount(2) (Linux 5.2): attach the detached mount `tree` (an open_tree fd) onto the
    directory open at fd `target` (`where`, for the error), no path looked up again."""
    _check(
        _syscall_move(
            syscall_number("move_mount"),
            tree,
            b"",
            target,
            b"",
            _MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH,
        ),
        f"move_mount onto {where}",
    )


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    """prctl(2)."""
    return _check(prctl_raw(option, arg2, arg3, arg4, arg5), f"prctl({option})")


def close_range(first: int, last: int, flags: int = 0) -> None:
    """close_range(2) (Linux 5.9; CLOSE_RANGE_CLOEXEC since 5.11)."""
    _check(_syscall_uints(syscall_number("close_range"), first, last, flags), "close_range")


def set_name(name: str) -> None:
    """Name the calling thread (`comm`, as ps, top and perf show it; 15 bytes at most)."""
    # The kernel copies at most 16 bytes, the last one its own NUL; bytes end with one too.
    _check(_prctl_name(_PR_SET_NAME, name.encode()[:15]), f"prctl({_PR_SET_NAME})")


def default_signal(signum: int) -> None:
    """Set `signum`'s disposition to SIG_DFL with rt_sigaction(2) itself.

    glibc's sigaction refuses the two signals it keeps for itself (SIGCANCEL and SIGSETXID,
    32 and 33), whose handlers a process gets once it has had threads.
    """
    # A zeroed struct kernel_sigaction: SIG_DFL, no flags, no restorer, an empty mask.
    action = ctypes.create_string_buffer(32)
    _check(
        _syscall_sigaction(
            syscall_number("rt_sigaction"), signum, ctypes.addressof(action), None, 8
        ),
        f"rt_sigaction({signum})",
    )


def clone(flags: int, cgroup_fd: int | None = None) -> int:
    """fork() with clone3 `flags` (new namespaces), born in cgroup2 directory `cgroup_fd`.

    Returns 0 in the child and its pid in the parent. With `CLONE_NEWPID` the child is pid 1
    of the new namespace; with `CLONE_NEWUSER` it holds every capability there from birth.
    Born in a cgroup (CLONE_INTO_CGROUP, Linux 5.7), a process is never migrated there, so
    it skips the write lock on the kernel's threadgroup rwsem whose first taker after a quiet
    spell waits out an RCU grace period while holding cgroup_mutex (5-20 ms measured here,
    stalling every other cgroup operation on the host meanwhile).
    Python's own fork hooks run around it as in os.fork(). The child's glibc thread
    descriptor keeps the parent's cached tid (a raw clone cannot set it), so the child must
    stay single-threaded and not pthread_kill/raise itself; its own os.fork() children are
    whole again. Raises OSError with clone3's errno.
    With `CLONE_PARENT` the child is the caller's parent's; clone3 then refuses any exit
    signal but 0 (EINVAL), and the child's is the caller's own (SIGCHLD, to that parent).
    """
    if cgroup_fd is not None:
        flags |= CLONE_INTO_CGROUP
    args = _CLONE_ARGS
    args.flags = flags
    args.exit_signal = 0 if flags & CLONE_PARENT else int(signal.SIGCHLD)
    args.cgroup = cgroup_fd if cgroup_fd is not None else 0
    _before_fork()
    pid: int = _clone3(syscall_number("clone3"), _CLONE_ARGS_ADDRESS, _CLONE_ARGS_SIZE)
    if pid == 0:
        _after_fork_child()
        return 0
    err = ctypes.get_errno()
    _after_fork_parent()
    if pid < 0:
        raise OSError(err, f"clone3: {os.strerror(err)}")
    return pid
