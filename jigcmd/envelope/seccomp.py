"""The candidate's seccomp deny-list, assembled as a classic-BPF program in pure Python.

The filter allows everything except a fixed list of system calls that would let a candidate
leave or reshape its envelope, reach into other processes, or touch host-global kernel state.
Denied calls fail with `EPERM` (an ordinary error Bun and glibc handle), except `clone3`, which
fails with `ENOSYS` so that glibc and Bun fall back to `clone`, whose flags a classic-BPF
filter can inspect (`clone3` passes them behind a pointer). Foreign ABIs kill the process.

Sockets are allow-listed by address family, because some families ignore the network
namespace: `AF_VSOCK` reaches the hypervisor host from any VM guest, whatever netns the
socket is made in. `socket` and `socketpair` may create `AF_UNIX`, `AF_INET` and `AF_INET6`
sockets, and `AF_NETLINK` only for `NETLINK_ROUTE` (a read-only view of the envelope's own
namespace: `lo`; its changes need `CAP_NET_ADMIN`, which the candidate lacks). Every other
family fails with `EAFNOSUPPORT`, every other netlink protocol (uevents, audit, …, some of
them host-global) with `EPROTONOSUPPORT`: the errors the kernel gives for a family or a
protocol it was built without, which runtimes already handle.

`prlimit64` may change only the caller's own limits (pid 0): pid 1 runs with the candidate's
uid (see pid1.py), and same-uid processes may otherwise set each other's limits. Likewise the
scheduling and I/O-priority calls may name neither pid 1 nor a process group or a uid (pid 1
leads its own group; its uid is the candidate's): demoted, pid 1 would see the end late.

The program is a flat list of `struct sock_filter` built by a tiny assembler with labels
(bpf.py), so each deny group jumps to one shared return.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
from typing import NamedTuple

from jigcmd.envelope.bpf import LD_W_ABS, RET_K, AssemblyError, Insn, assemble, jeq, jset, stmt
from jigcmd.envelope.syscalls import (
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    CLONE_NEWUTS,
    prctl,
)

__all__ = [
    "CLONE_NAMESPACE_FLAGS",
    "NETLINK_PROTOCOLS_ALLOWED",
    "PERSONALITY_ALLOWED",
    "SOCKET_FAMILIES_ALLOWED",
    "SeccompError",
    "build_filter",
    "denied_syscalls",
    "install",
    "prepare",
    "syscall_numbers",
]

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6].
# Both supported architectures are little-endian, so an argument's low 32 bits sit at its offset.
_OFF_NR = 0
_OFF_ARCH = 4


def _arg_low(index: int) -> int:
    return 16 + 8 * index


# Return actions (linux/seccomp.h).
RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
_MAX_ERRNO = 4095

_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_PR_GET_NO_NEW_PRIVS = 39
_PR_SET_NO_NEW_PRIVS = 38

# Every namespace flag `clone` accepts. CLONE_NEWTIME (0x80) is absent on purpose: in `clone`'s
# flags that bit belongs to the exit-signal byte, and time namespaces are reachable only through
# `unshare` and `clone3`, both denied outright.
CLONE_NAMESPACE_FLAGS = (
    CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
)

# personality(2): PER_LINUX (0) and the 0xffffffff query are what runtimes use. Everything else
# is refused; ADDR_NO_RANDOMIZE and READ_IMPLIES_EXEC would weaken the candidate's own ASLR/NX
# and the compatibility personalities serve no Bun program.
PERSONALITY_ALLOWED = (0x0, 0xFFFFFFFF)

# ioctl(2) requests that inject input into or reconfigure a terminal (the classic escape from a
# sandbox that shares a tty). The kernel reads the request as an unsigned int, so the filter
# compares the low 32 bits and a request with junk in the high bits is caught too.
_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C

# Address families a candidate may create sockets of (linux/socket.h), and the netlink
# protocols it may open (linux/netlink.h); see the module docstring. Bun needs UNIX, INET
# and INET6 (its event loop, node:net, fetch to loopback); NETLINK_ROUTE serves getifaddrs
# (`os.networkInterfaces()`).
_AF_UNIX = 1
_AF_INET = 2
_AF_INET6 = 10
_AF_NETLINK = 16
_NETLINK_ROUTE = 0
SOCKET_FAMILIES_ALLOWED = (_AF_UNIX, _AF_INET, _AF_INET6, _AF_NETLINK)
NETLINK_PROTOCOLS_ALLOWED = (_NETLINK_ROUTE,)

_AUDIT_ARCH_X86_64 = 0xC000003E
_AUDIT_ARCH_AARCH64 = 0xC00000B7
# x32 system calls are x86_64 calls with this bit set; the arch field cannot tell them apart.
_X32_SYSCALL_BIT = 0x40000000

# Pid 1, and the `which` of setpriority (linux/resource.h) and ioprio_set (linux/ioprio.h):
# one process, a process group, a uid. The sched_set* calls take the pid first (0: the caller).
_INIT = 1
_PRIO_PROCESS, _PRIO_PGRP, _PRIO_USER = 0, 1, 2
_IOPRIO_WHO_PROCESS, _IOPRIO_WHO_PGRP, _IOPRIO_WHO_USER = 1, 2, 3
_SCHED_BY_PID = ("sched_setscheduler", "sched_setparam", "sched_setattr", "sched_setaffinity")

# Denied with EPERM, by group; each group says why.
_DENY_GROUPS: dict[str, tuple[str, ...]] = {
    # Reshaping the filesystem view: the envelope's root is fixed before the candidate starts.
    "mount": (
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "move_mount",
        "open_tree",
        "open_tree_attr",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
    ),
    # New or other namespaces: a nested user namespace hands back a full capability set.
    "namespaces": ("unshare", "setns"),
    # The kernel keyring is not namespaced: keys would outlive the run and cross runs.
    "keyring": ("keyctl", "add_key", "request_key"),
    # Large kernel attack surface that Bun never needs.
    "kernel surface": ("bpf", "perf_event_open", "userfaultfd", "lookup_dcookie"),
    "io_uring": ("io_uring_setup", "io_uring_enter", "io_uring_register"),
    # Native AIO: every context's events count against the host-wide fs.aio-max-nr, so one
    # candidate could hold them all and fail every host process's io_setup (EAGAIN), jigcmd's
    # own journal syncs among them. Bun never makes a context (strace); glibc's aio_* use threads.
    "native aio": (
        "io_setup",
        "io_destroy",
        "io_submit",
        "io_cancel",
        "io_getevents",
        "io_pgetevents",
    ),
    # Reaching into another process (pid namespace peers, or the init through a bug).
    "other processes": (
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "process_madvise",
        "pidfd_getfd",
        "kcmp",
    ),
    # Host-global machine state: never for a candidate, whatever capabilities it has.
    "host state": (
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "reboot",
        "swapon",
        "swapoff",
        "acct",
        "quotactl",
        "quotactl_fd",
        "syslog",
        "vhangup",
    ),
    # The clock is shared with the host (time namespaces are denied above).
    "clock": ("settimeofday", "clock_settime", "clock_adjtime", "adjtimex"),
    # File handles bypass path-based confinement (open_by_handle_at is the "shocker" escape);
    # name_to_handle_at only mints them, but has no use inside the envelope.
    "file handles": ("open_by_handle_at", "name_to_handle_at"),
    # Raw port I/O (x86_64 only).
    "port io": ("iopl", "ioperm"),
}

# Syscall numbers as (x86_64, aarch64), from the kernel's unistd_64.h and asm-generic/unistd.h;
# None where the architecture has no such call. Calls newer than the running kernel (e.g.
# open_tree_attr, 6.15) would fail with ENOSYS anyway; denying them costs one comparison.
_NUMBERS: dict[str, tuple[int, int | None]] = {
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "move_mount": (429, 429),
    "open_tree": (428, 428),
    "open_tree_attr": (467, 467),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "unshare": (272, 97),
    "setns": (308, 268),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "lookup_dcookie": (212, 18),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "io_setup": (206, 0),
    "io_destroy": (207, 1),
    "io_submit": (209, 2),
    "io_cancel": (210, 3),
    "io_getevents": (208, 4),
    "io_pgetevents": (333, 292),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "process_madvise": (440, 440),
    "pidfd_getfd": (438, 438),
    "kcmp": (312, 272),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "syslog": (103, 116),
    "vhangup": (153, 58),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "iopl": (172, None),
    "ioperm": (173, None),
    "clone": (56, 220),
    "clone3": (435, 435),
    "personality": (135, 92),
    "ioctl": (16, 29),
    "socket": (41, 198),
    "socketpair": (53, 199),
    "prlimit64": (302, 261),
    "setpriority": (141, 140),
    "ioprio_set": (251, 30),
    "sched_setscheduler": (144, 119),
    "sched_setparam": (142, 118),
    "sched_setattr": (314, 274),
    "sched_setaffinity": (203, 122),
}


def _table(index: int) -> dict[str, int]:
    table: dict[str, int] = {}
    for name, pair in _NUMBERS.items():
        number = pair[index]
        if number is not None:
            table[name] = number
    return table


_SYSCALLS = {"x86_64": _table(0), "aarch64": _table(1)}

_AUDIT_ARCH = {"x86_64": _AUDIT_ARCH_X86_64, "aarch64": _AUDIT_ARCH_AARCH64}


class SeccompError(OSError):
    """Raised when the seccomp filter cannot be built for this machine or cannot be installed."""


def _machine(machine: str | None = None) -> str:
    machine = machine or os.uname().machine
    if machine not in _SYSCALLS:
        raise SeccompError(f"no seccomp filter for architecture {machine!r}")
    return machine


def syscall_numbers(machine: str | None = None) -> dict[str, int]:
    """Name → number of every syscall the filter names, on `machine` (default: this one)."""
    return dict(_SYSCALLS[_machine(machine)])


def denied_syscalls(machine: str | None = None) -> dict[str, int]:
    """Name → number of every syscall denied outright (EPERM) on `machine` (default: this one)."""
    table = _SYSCALLS[_machine(machine)]
    return {
        name: table[name]
        for group in _DENY_GROUPS.values()
        for name in group
        if name in table  # iopl/ioperm exist on x86_64 only
    }


@functools.cache
def build_filter(*, machine: str | None = None, deny_errno: int = errno.EPERM) -> bytes:
    """The filter as packed `struct sock_filter` records, for this machine unless `machine`.

    `deny_errno` exists so tests can tell the filter's answer from the kernel's own EPERM.
    """
    machine = _machine(machine)
    if not 0 < deny_errno <= _MAX_ERRNO:
        raise SeccompError(f"deny errno {deny_errno} outside 1..{_MAX_ERRNO}")
    nr = _SYSCALLS[machine]
    program: list[Insn] = [
        stmt(LD_W_ABS, _OFF_ARCH),
        jeq(_AUDIT_ARCH[machine], jf="kill"),
        stmt(LD_W_ABS, _OFF_NR),
    ]
    if machine == "x86_64":
        program.append(jset(_X32_SYSCALL_BIT, jt="kill"))
    program += [jeq(number, jt="deny") for number in denied_syscalls(machine).values()]
    program += [
        jeq(nr["clone3"], jt="enosys"),
        jeq(nr["clone"], jt="clone"),
        jeq(nr["personality"], jt="personality"),
        jeq(nr["ioctl"], jt="ioctl"),
        jeq(nr["socket"], jt="socket"),
        jeq(nr["socketpair"], jt="socket"),
        jeq(nr["prlimit64"], jt="prlimit"),
        jeq(nr["setpriority"], jt="setpriority"),
        jeq(nr["ioprio_set"], jt="ioprio"),
        *(jeq(nr[name], jt="sched") for name in _SCHED_BY_PID),
        stmt(RET_K, _RET_ALLOW),
        # Pid 1's priority, policy, CPUs and I/O class: see the module docstring. The kernel
        # reads `which`, `who` and `pid` as ints, so their low 32 bits decide; a `which` it
        # does not know passes, for its own EINVAL.
        "setpriority",
        stmt(LD_W_ABS, _arg_low(0)),
        jeq(_PRIO_PROCESS, jt="who"),
        jeq(_PRIO_PGRP, jt="deny"),
        jeq(_PRIO_USER, jt="deny", jf="allow"),
        "ioprio",
        stmt(LD_W_ABS, _arg_low(0)),
        jeq(_IOPRIO_WHO_PROCESS, jt="who"),
        jeq(_IOPRIO_WHO_PGRP, jt="deny"),
        jeq(_IOPRIO_WHO_USER, jt="deny", jf="allow"),
        "who",
        stmt(LD_W_ABS, _arg_low(1)),
        jeq(_INIT, jt="deny", jf="allow"),
        "sched",
        stmt(LD_W_ABS, _arg_low(0)),
        jeq(_INIT, jt="deny", jf="allow"),
        # Another process's limits only: pid 1 runs as the candidate's uid, and lowering its
        # RLIMIT_CPU would have the kernel kill the collector of the candidate's evidence.
        "prlimit",
        stmt(LD_W_ABS, _arg_low(0)),
        jeq(0, jt="allow"),
        stmt(RET_K, _RET_ERRNO | deny_errno),
        # The kernel reads the family and the protocol as ints: their low 32 bits decide.
        "socket",
        stmt(LD_W_ABS, _arg_low(0)),
        jeq(_AF_NETLINK, jt="netlink"),
        *(jeq(family, jt="allow") for family in SOCKET_FAMILIES_ALLOWED),
        stmt(RET_K, _RET_ERRNO | errno.EAFNOSUPPORT),
        "netlink",
        stmt(LD_W_ABS, _arg_low(2)),
        *(jeq(protocol, jt="allow") for protocol in NETLINK_PROTOCOLS_ALLOWED),
        stmt(RET_K, _RET_ERRNO | errno.EPROTONOSUPPORT),
        "clone",
        stmt(LD_W_ABS, _arg_low(0)),
        jset(CLONE_NAMESPACE_FLAGS, jt="deny"),
        stmt(RET_K, _RET_ALLOW),
        "personality",
        stmt(LD_W_ABS, _arg_low(0)),
        *(jeq(value, jt="allow") for value in PERSONALITY_ALLOWED),
        stmt(RET_K, _RET_ERRNO | deny_errno),
        "ioctl",
        stmt(LD_W_ABS, _arg_low(1)),
        jeq(_TIOCSTI, jt="deny"),
        jeq(_TIOCLINUX, jt="deny"),
        "allow",
        stmt(RET_K, _RET_ALLOW),
        "deny",
        stmt(RET_K, _RET_ERRNO | deny_errno),
        "enosys",
        stmt(RET_K, _RET_ERRNO | errno.ENOSYS),
        "kill",
        stmt(RET_K, RET_KILL_PROCESS),
    ]
    try:
        return assemble(program)
    except AssemblyError as exc:
        raise SeccompError(str(exc)) from exc


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


class _Loaded(NamedTuple):
    """A program in ctypes memory; the kernel reads `buffer` through `fprog` when installing."""

    buffer: ctypes.Array[ctypes.c_char]
    fprog: _SockFprog


@functools.cache
def _load(program: bytes) -> _Loaded:
    # Cached, so a fork server builds it once: a forked candidate then only reads these pages
    # (no copy-on-write faults), and both objects stay alive while the kernel copies them.
    if not program or len(program) % 8:
        raise SeccompError(f"seccomp program of {len(program)} bytes is not whole instructions")
    buffer = ctypes.create_string_buffer(program, len(program))
    return _Loaded(buffer, _SockFprog(len(program) // 8, ctypes.addressof(buffer)))


def install(program: bytes | None = None) -> None:
    """Install `program` (default: `build_filter()`) on the calling thread; it cannot be undone.

    Sets `PR_SET_NO_NEW_PRIVS` first if it is not set yet: without `CAP_SYS_ADMIN` the kernel
    refuses a filter otherwise, and with it the filter must not be combined with privilege gain.
    Call it once in a parent (e.g. via `privileges.prepare()`) to have the ctypes copy ready.
    """
    loaded = _load(build_filter() if program is None else program)
    try:
        if prctl(_PR_GET_NO_NEW_PRIVS) != 1:
            prctl(_PR_SET_NO_NEW_PRIVS, 1)
        prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(loaded.fprog))
    except OSError as exc:
        raise SeccompError(exc.errno, f"installing the seccomp filter: {exc.strerror}") from exc


def prepare() -> None:
    """Build the default filter and its ctypes copy now, before forking the candidate."""
    _load(build_filter())
