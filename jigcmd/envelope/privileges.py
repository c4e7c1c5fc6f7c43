"""Turning the envelope's init child into the candidate: drop every privilege, then verify.

The init runs as uid 0 of the run's user namespace with a full capability set there. The
candidate it forks must keep none of that: no capability in any set, locked securebits so that
exec as uid 0 grants nothing back, `no_new_privs`, the seccomp deny-list, and rlimits. Every
step fails closed with a `PrivilegeError` naming it, and the result is verified from
`/proc/self/status` before the caller may exec Bun.

Call `prepare()` in the init before `pivot_root` (it reads host facts from `/proc/sys`), and
`drop_to_candidate()` in the forked candidate just before `execve`. This module does nothing
with a controlling terminal beyond `setsid`; the envelope never gives the candidate one.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno as errno_codes
import os
import resource
from collections.abc import Iterator
from typing import NamedTuple

from jigcmd.envelope import seccomp, ucounts
from jigcmd.envelope.syscalls import prctl_raw, typed

__all__ = [
    "CANDIDATE_SECUREBITS",
    "HostFacts",
    "PrivilegeError",
    "begin_drop",
    "close_fds_except_stdio",
    "drop_to_candidate",
    "effective_capability",
    "finish_drop",
    "prepare",
    "read_status",
]

_PR_CAPBSET_DROP = 24
_PR_GET_SECUREBITS = 27
_PR_SET_SECUREBITS = 28
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4

_SECBIT_NOROOT = 1 << 0
_SECBIT_NOROOT_LOCKED = 1 << 1
_SECBIT_NO_SETUID_FIXUP = 1 << 2
_SECBIT_NO_SETUID_FIXUP_LOCKED = 1 << 3
_SECBIT_KEEP_CAPS_LOCKED = 1 << 5
_SECBIT_NO_CAP_AMBIENT_RAISE = 1 << 6
_SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED = 1 << 7

# NOROOT: exec as uid 0 grants no capabilities. NO_SETUID_FIXUP: uid changes neither grant nor
# shuffle capabilities. KEEP_CAPS stays off (locked). NO_CAP_AMBIENT_RAISE: the ambient set stays
# empty. Every bit is locked, so the candidate cannot undo any of them.
CANDIDATE_SECUREBITS = (
    _SECBIT_NOROOT
    | _SECBIT_NOROOT_LOCKED
    | _SECBIT_NO_SETUID_FIXUP
    | _SECBIT_NO_SETUID_FIXUP_LOCKED
    | _SECBIT_KEEP_CAPS_LOCKED
    | _SECBIT_NO_CAP_AMBIENT_RAISE
    | _SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED
)

_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_NR_CLOSE_RANGE = 436  # the same number on x86_64 and aarch64
_CLOSE_RANGE_MAX = 0xFFFFFFFF
_CAP_LAST_CAP_PATH = "/proc/sys/kernel/cap_last_cap"

# What /proc/self/status must say once the candidate is ready to exec.
_EXPECTED_STATUS = {
    "CapInh": 0,
    "CapPrm": 0,
    "CapEff": 0,
    "CapBnd": 0,
    "CapAmb": 0,
    "NoNewPrivs": 1,
    "Seccomp": 2,
}
_VERIFIED_FIELDS = (*_EXPECTED_STATUS, "Groups")


class PrivilegeError(OSError):
    """Raised when a step of dropping the candidate's privileges fails; nothing may run then."""

    def __init__(self, step: str, code: int | None, detail: str) -> None:
        if code is None:
            super().__init__(f"{step}: {detail}")
        else:
            super().__init__(code, f"{step}: {detail}")
        self.step = step


class HostFacts(NamedTuple):
    """Facts about the host kernel read once, before the candidate's root replaces the host's."""

    cap_last_cap: int


_facts: HostFacts | None = None


@contextlib.contextmanager
def _step(name: str) -> Iterator[None]:
    try:
        yield
    except PrivilegeError:
        raise
    except OSError as exc:
        raise PrivilegeError(name, exc.errno, exc.strerror or str(exc)) from exc
    except ValueError as exc:  # resource.setrlimit's complaint about its arguments
        raise PrivilegeError(name, errno_codes.EINVAL, str(exc)) from exc


def prepare() -> HostFacts:
    """Read and cache the host facts the drop needs, and load the seccomp filter; call it early."""
    global _facts  # noqa: PLW0603 - a per-process cache filled before the root changes
    if _facts is None:
        with _step("prepare"):
            with open(_CAP_LAST_CAP_PATH, encoding="ascii") as file:
                text = file.read().strip()
            if not text.isdigit():
                raise PrivilegeError("prepare", None, f"{_CAP_LAST_CAP_PATH} says {text!r}")
            seccomp.prepare()
        _facts = HostFacts(cap_last_cap=int(text))
    return _facts


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


# Typed prototypes (see syscalls.typed): the candidate's 40-odd bounding-set drops stay cheap.
_capset = typed("capset", ctypes.c_int, ctypes.POINTER(_CapHeader), ctypes.POINTER(_CapData))
_syscall3 = typed(
    "syscall", ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_long, ctypes.c_long
)

# Built at import, before any fork: the candidate only reads them. Version 3 takes two 32-bit
# halves of each set; all zero.
_CAP_HEADER = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
_CAP_DATA = (_CapData * 2)()


def _pr(option: int, arg2: int = 0) -> int:
    result: int = prctl_raw(option, arg2, 0, 0, 0)
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def _clear_capability_sets() -> None:
    if _capset(_CAP_HEADER, _CAP_DATA) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _set_rlimits(nofile: int, fsize_bytes: int) -> None:
    # resource.setrlimit turns a negative value into a huge unsigned one: refuse it here.
    if nofile < 1 or fsize_bytes < 0:
        raise ValueError(f"need nofile >= 1 and fsize_bytes >= 0, got {nofile} and {fsize_bytes}")
    # Soft and hard alike, so the candidate cannot raise them back. Never RLIMIT_AS: Bun's JIT
    # reserves gigabytes of address space; memory is bounded by the cgroup instead.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_bytes, fsize_bytes))
    # No nice below the server's and no real-time policy, whatever the host grants the server
    # (a container's `--ulimit rtprio`, systemd's LimitRTPRIO=): pid 1 shares the candidate's
    # CPU, and a SCHED_FIFO or nice -20 candidate could starve it of its collection.
    resource.setrlimit(resource.RLIMIT_NICE, (0, 0))
    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
    # Message queue bytes and queued signals are charged to host root as well (ucounts.py).
    for limit, value in ucounts.RLIMITS:
        resource.setrlimit(limit, (value, value))


def _new_session() -> None:
    try:
        os.setsid()
    except PermissionError:
        # EPERM means "already a process group leader"; that is fine only if it leads a session.
        if os.getsid(0) != os.getpid():
            raise


def drop_to_candidate(
    nofile: int, fsize_bytes: int, kept_groups: frozenset[int] = frozenset()
) -> None:
    """Drop every privilege of the calling (single-threaded) process and verify it; exec next.

    `kept_groups`: supplementary groups that may remain. Only a rootless envelope passes any:
    without CAP_SETGID on the host its user's own groups cannot be dropped (the kernel denies
    setgroups in a user namespace whose gid map an unprivileged process wrote).
    """
    begin_drop(nofile, fsize_bytes)
    finish_drop(kept_groups)


def begin_drop(nofile: int, fsize_bytes: int) -> None:
    """The drop's first half: everything that leaves the caller its effective capabilities.

    Rlimits, a session of its own, the ambient set cleared, the securebits locked and the
    bounding set emptied: none of it limits what the caller itself may still do (the
    bounding set only bounds what a later exec or capset could gain). Pid 1 does this while
    it prepares, and `finish_drop` at the go, after the last step that needs a capability.
    """
    facts = prepare()
    # Rlimits first: raising a hard limit (nofile above the inherited one) needs
    # CAP_SYS_RESOURCE, which is gone after the capability steps.
    with _step("rlimits"):
        _set_rlimits(nofile, fsize_bytes)
    # A new session: no controlling terminal, and out of the init's process group.
    with _step("setsid"):
        _new_session()
    with _step("clear ambient capabilities"):
        _pr(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
    # Securebits and the bounding-set drop both need CAP_SETPCAP in the effective set, so they
    # come before capset clears it. Securebits go first so that nothing done later (or by
    # exec as uid 0) can re-grant capabilities.
    with _step("set securebits"):
        _pr(_PR_SET_SECUREBITS, CANDIDATE_SECUREBITS)
    with _step("drop bounding capabilities"):
        for cap in range(facts.cap_last_cap + 1):
            _pr(_PR_CAPBSET_DROP, cap)


def finish_drop(kept_groups: frozenset[int] = frozenset()) -> None:
    """The drop's second half, after `begin_drop`: no capability left, the filter, verified."""
    with _step("clear capability sets"):
        _clear_capability_sets()
    # PR_SET_DUMPABLE 0 is not set: execve resets it for a readable binary, so it would not
    # survive into Bun. ptrace is denied by the filter and the pid namespace hides the host.
    with _step("set no_new_privs"):
        _pr(_PR_SET_NO_NEW_PRIVS, 1)
    # The filter last: it needs no_new_privs (there is no CAP_SYS_ADMIN any more), and
    # installing it earlier would put every later step under it for no gain.
    with _step("install seccomp filter"):
        seccomp.install()
    _verify(kept_groups)


def read_status(fields: tuple[str, ...] | None = None) -> dict[str, str]:
    """The calling process's /proc/self/status, field by field (only `fields` if given)."""
    # Raw os.read: no TextIOWrapper to build in the candidate, and the file fits one read.
    fd = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
    try:
        raw = os.read(fd, 65536)
    finally:
        os.close(fd)
    if fields is not None:
        # Pid 1 reads a few fields: each line it does not split is objects it does not make
        # (pages of the zygote's image it does not copy, see docs/envelope.md).
        return {name: value for name in fields if (value := _field(raw, name)) is not None}
    lines = (line.split(":", 1) for line in raw.decode("ascii", "replace").splitlines())
    return {pair[0]: pair[1].strip() for pair in lines if len(pair) == 2}


def _field(raw: bytes, name: str) -> str | None:
    key = name.encode("ascii") + b":"
    if raw.startswith(key):
        start = len(key)
    else:
        start = raw.find(b"\n" + key)
        if start < 0:
            return None
        start += len(key) + 1
    end = raw.find(b"\n", start)
    return raw[start : end if end >= 0 else len(raw)].strip().decode("ascii", "replace")


def effective_capability(cap: int) -> bool:
    """Whether the calling process holds capability number `cap` in its effective set."""
    return bool(int(read_status(("CapEff",)).get("CapEff", "0"), 16) >> cap & 1)


def _verify(kept_groups: frozenset[int] = frozenset()) -> None:
    with _step("verify"):
        status = read_status(_VERIFIED_FIELDS)
        for field, want in _EXPECTED_STATUS.items():
            raw = status.get(field)
            if raw is None:
                raise PrivilegeError("verify", None, f"/proc/self/status has no {field}")
            got = int(raw, 16 if field.startswith("Cap") else 10)
            if got != want:
                raise PrivilegeError("verify", None, f"{field} is {raw}, want {want}")
        # A supplementary group left over from host root (shown as the overflow gid) would
        # still grant file access; the init must have called setgroups([]).
        groups = {int(group) for group in status.get("Groups", "").split()}
        if not groups <= kept_groups:
            raise PrivilegeError("verify", None, f"supplementary groups left: {status['Groups']}")
        securebits = _pr(_PR_GET_SECUREBITS)
        if securebits != CANDIDATE_SECUREBITS:
            raise PrivilegeError(
                "verify", None, f"securebits are {securebits:#x}, want {CANDIDATE_SECUREBITS:#x}"
            )


def close_fds_except_stdio() -> None:
    """Close every file descriptor above 2 (close_range(2), or one by one where it is missing)."""
    with _step("close fds"):
        if _syscall3(_NR_CLOSE_RANGE, 3, _CLOSE_RANGE_MAX, 0):
            code = ctypes.get_errno()
            if code != errno_codes.ENOSYS:
                raise OSError(code, f"close_range: {os.strerror(code)}")
            # Kernels before 5.9: list what is open; closing the listing's own fd is harmless.
            for name in os.listdir("/proc/self/fd"):
                if int(name) > 2:
                    with contextlib.suppress(OSError):
                        os.close(int(name))
