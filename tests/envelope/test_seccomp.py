"""The seccomp deny-list: its program, emulated for both architectures, and the real kernel."""

from __future__ import annotations

import errno
import json
import os
import platform
import signal
import struct
import textwrap
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from jigcmd.envelope import seccomp
from tests.envelope.userns_script import run_mapped
from tests.required import unavailable

REPO = Path(__file__).resolve().parents[2]
MACHINES = ("x86_64", "aarch64")
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
FOREIGN_ARCHES = (0x40000003, 0x40000028, 0xC00000F3)  # i386, arm, riscv64
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_EPERM = 0x00050000 | errno.EPERM
RET_ENOSYS = 0x00050000 | errno.ENOSYS
RET_EAFNOSUPPORT = 0x00050000 | errno.EAFNOSUPPORT
RET_EPROTONOSUPPORT = 0x00050000 | errno.EPROTONOSUPPORT
CLONE_NEWUSER = 0x10000000
CLONE_THREAD = 0x00010000
SIGCHLD = 17
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
FIONREAD = 0x541B
# An errno no kernel path returns, so that a test sees the filter's answer and not the kernel's.
MARKER_ERRNO = 3999


def evaluate(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """Run a classic-BPF seccomp program the way the kernel does, for one system call."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(args + (0,) * (6 - len(args))))
    instructions = list(struct.iter_unpack("=HBBI", program))
    pc, acc = 0, 0
    while True:
        code: int
        k: int
        code, jt, jf, k = instructions[pc]
        if code == 0x20:  # ld [k]
            (acc,) = struct.unpack_from("=I", data, k)
            pc += 1
        elif code == 0x15:  # jeq #k
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x45:  # jset #k
            pc += 1 + (jt if acc & k else jf)
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x} at {pc}")


def verdict(machine: str, name: str, *args: int) -> int:
    """The filter's answer for syscall `name` with `args` on `machine`."""
    nr = seccomp.syscall_numbers(machine)[name]
    return evaluate(seccomp.build_filter(machine=machine), nr, AUDIT_ARCH[machine], args)


@pytest.mark.parametrize("machine", MACHINES)
def test_every_listed_syscall_is_denied_with_eperm(machine: str) -> None:
    """Each syscall on the deny-list gets EPERM whatever its arguments."""
    program = seccomp.build_filter(machine=machine)
    for name, nr in seccomp.denied_syscalls(machine).items():
        for args in ((), (2**64 - 1,) * 6):
            assert evaluate(program, nr, AUDIT_ARCH[machine], args) == RET_EPERM, name


@pytest.mark.parametrize(
    ("machine", "ordinary"),
    [("x86_64", (0, 1, 39, 57, 59, 231, 318, 434, 436)), ("aarch64", (63, 64, 172, 221, 278))],
)
def test_ordinary_syscalls_are_allowed(machine: str, ordinary: tuple[int, ...]) -> None:
    """read, write, getpid, fork, execve, exit_group, getrandom and friends pass untouched."""
    program = seccomp.build_filter(machine=machine)
    for nr in ordinary:
        assert evaluate(program, nr, AUDIT_ARCH[machine]) == RET_ALLOW, nr


@pytest.mark.parametrize("machine", MACHINES)
def test_foreign_abis_kill_the_process(machine: str) -> None:
    """A system call made through another architecture's ABI kills the process."""
    program = seccomp.build_filter(machine=machine)
    for arch in (*FOREIGN_ARCHES, *(a for a in AUDIT_ARCH.values() if a != AUDIT_ARCH[machine])):
        assert evaluate(program, 20, arch) == RET_KILL_PROCESS


def test_x32_system_calls_kill_the_process_on_x86_64() -> None:
    """x86_64 calls with the x32 bit set kill the process, denied or not."""
    program = seccomp.build_filter(machine="x86_64")
    for nr in (39, 272):
        assert evaluate(program, nr | 0x40000000, AUDIT_ARCH["x86_64"]) == RET_KILL_PROCESS


@pytest.mark.parametrize("machine", MACHINES)
def test_clone3_fails_with_enosys_so_runtimes_fall_back_to_clone(machine: str) -> None:
    """clone3 answers ENOSYS, the signal glibc and Bun take to retry with clone."""
    assert verdict(machine, "clone3") == RET_ENOSYS


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("flag", [1 << bit for bit in range(32) if (1 << bit) & 0x7E020000])
def test_clone_with_any_namespace_flag_is_denied(machine: str, flag: int) -> None:
    """clone with a CLONE_NEW* flag is denied, also when junk fills the upper 32 bits."""
    assert flag & seccomp.CLONE_NAMESPACE_FLAGS
    assert verdict(machine, "clone", flag | SIGCHLD) == RET_EPERM
    assert verdict(machine, "clone", flag | (0xFFFF << 32)) == RET_EPERM


@pytest.mark.parametrize("machine", MACHINES)
def test_clone_without_namespace_flags_is_allowed(machine: str) -> None:
    """fork-style and thread-style clone calls pass, as do flags only in the ignored upper half."""
    for flags in (SIGCHLD, 0x3D0F00, 0x004111, CLONE_NEWUSER << 32):
        assert verdict(machine, "clone", flags) == RET_ALLOW, hex(flags)


@pytest.mark.parametrize("machine", MACHINES)
def test_personality_allows_only_the_default_and_the_query(machine: str) -> None:
    """personality(0) and personality(0xffffffff) pass; ADDR_NO_RANDOMIZE and others are denied."""
    for persona in seccomp.PERSONALITY_ALLOWED:
        assert verdict(machine, "personality", persona) == RET_ALLOW
    for persona in (0x0040000, 0x0400000, 0x0008, 0x0020000):
        assert verdict(machine, "personality", persona) == RET_EPERM


@pytest.mark.parametrize("machine", MACHINES)
def test_terminal_injection_ioctls_are_denied_even_with_high_bits(machine: str) -> None:
    """TIOCSTI and TIOCLINUX are denied however the upper half is set; other ioctls pass."""
    for request in (TIOCSTI, TIOCLINUX, TIOCSTI | (1 << 32), TIOCLINUX | (0xFFFFFFFF << 32)):
        assert verdict(machine, "ioctl", 0, request) == RET_EPERM
    assert verdict(machine, "ioctl", 0, FIONREAD) == RET_ALLOW


# Families outside the allow-list, each of which some kernel builds offer (linux/socket.h).
EXCLUDED_FAMILIES = {
    "AF_PACKET": 17,
    "AF_VSOCK": 40,
    "AF_XDP": 44,
    "AF_CAN": 29,
    "AF_BLUETOOTH": 31,
    "AF_ALG": 38,
    "AF_KEY": 15,
    "AF_TIPC": 30,
    "AF_RDS": 21,
    "AF_QIPCRTR": 42,
    "AF_SMC": 43,
    "AF_MCTP": 45,
    "AF_UNSPEC": 0,
}


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("call", ["socket", "socketpair"])
def test_socket_families_outside_the_allow_list_fail_with_eafnosupport(
    machine: str, call: str
) -> None:
    """VSOCK, PACKET, XDP, CAN, … get EAFNOSUPPORT from socket and socketpair, whatever the type."""
    for family in (*EXCLUDED_FAMILIES.values(), 46, 255, 0xFFFF):
        for kind in (1, 2, 5, 1 | 0o2000000 | 0o4000):
            assert verdict(machine, call, family, kind, 0) == RET_EAFNOSUPPORT, (family, kind)


@pytest.mark.parametrize("machine", MACHINES)
def test_unix_inet_and_inet6_sockets_pass_and_junk_high_bits_do_not_disguise_a_family(
    machine: str,
) -> None:
    """AF_UNIX, AF_INET and AF_INET6 pass; the kernel reads an int, so only the low half counts."""
    for family in (1, 2, 10):
        assert verdict(machine, "socket", family, 1, 0) == RET_ALLOW
        assert verdict(machine, "socketpair", family, 1, 0) == RET_ALLOW
        assert verdict(machine, "socket", family | (0xFFFF << 32), 2, 0) == RET_ALLOW
    assert verdict(machine, "socket", 40 | (1 << 32), 1, 0) == RET_EAFNOSUPPORT


@pytest.mark.parametrize("machine", MACHINES)
def test_netlink_is_allowed_only_for_route(machine: str) -> None:
    """NETLINK_ROUTE passes (getifaddrs); uevents, audit, sock_diag and others do not."""
    assert verdict(machine, "socket", 16, 3, 0) == RET_ALLOW
    assert verdict(machine, "socket", 16, 3, 1 << 32) == RET_ALLOW
    for protocol in (2, 4, 9, 11, 15, 16, 21, 31):
        assert verdict(machine, "socket", 16, 3, protocol) == RET_EPROTONOSUPPORT, protocol


@pytest.mark.parametrize("machine", MACHINES)
def test_prlimit_reaches_only_the_callers_own_limits(machine: str) -> None:
    """prlimit64(0, …) passes; another pid (pid 1 shares the candidate's uid) is denied."""
    assert verdict(machine, "prlimit64", 0, 0, 0, 0) == RET_ALLOW
    assert verdict(machine, "prlimit64", 1 << 32, 0, 0, 0) == RET_ALLOW
    for pid in (1, 2, 4242, 0xFFFFFFFF):
        assert verdict(machine, "prlimit64", pid, 0, 0, 0) == RET_EPERM, pid


@pytest.mark.parametrize("machine", MACHINES)
def test_scheduling_calls_cannot_name_pid_1_its_group_or_its_uid(machine: str) -> None:
    """Pid 1 (also with junk in the upper half), any group or uid is denied; other pids pass."""
    for pid in (1, 1 | (1 << 32), 1 | (0xFFFFFFFF << 32)):
        assert verdict(machine, "setpriority", 0, pid, 19) == RET_EPERM, pid
        assert verdict(machine, "ioprio_set", 1, pid, 3 << 13) == RET_EPERM, pid
        for name in ("sched_setscheduler", "sched_setparam", "sched_setattr", "sched_setaffinity"):
            assert verdict(machine, name, pid, 5, 0) == RET_EPERM, (name, pid)
    for who in (0, 1, 2, 4242):
        assert verdict(machine, "setpriority", 1, who, 19) == RET_EPERM  # PRIO_PGRP
        assert verdict(machine, "setpriority", 2 | (1 << 32), who, 19) == RET_EPERM  # PRIO_USER
        assert verdict(machine, "ioprio_set", 2, who, 0) == RET_EPERM  # IOPRIO_WHO_PGRP
        assert verdict(machine, "ioprio_set", 3, who, 0) == RET_EPERM  # IOPRIO_WHO_USER
    for pid in (0, 2, 4242, 1 << 32, 0xFFFFFFFF):
        assert verdict(machine, "setpriority", 0 | (1 << 32), pid, 10) == RET_ALLOW, pid
        assert verdict(machine, "ioprio_set", 1, pid, 0) == RET_ALLOW, pid
        for name in ("sched_setscheduler", "sched_setparam", "sched_setattr", "sched_setaffinity"):
            assert verdict(machine, name, pid, 0, 0) == RET_ALLOW, (name, pid)
    # A `which` the kernel does not know reaches it, for its own EINVAL.
    assert verdict(machine, "setpriority", 3, 1, 0) == RET_ALLOW
    assert verdict(machine, "ioprio_set", 0, 1, 0) == RET_ALLOW


def test_port_io_is_denied_only_where_it_exists() -> None:
    """iopl and ioperm are on the x86_64 list and absent from aarch64's."""
    assert {"iopl", "ioperm"} <= seccomp.denied_syscalls("x86_64").keys()
    assert not {"iopl", "ioperm"} & seccomp.denied_syscalls("aarch64").keys()


def test_the_filter_is_built_once_and_is_whole_instructions() -> None:
    """build_filter returns the same cached bytes, a whole number of 8-byte instructions."""
    program = seccomp.build_filter(machine="x86_64")
    assert program is seccomp.build_filter(machine="x86_64")
    assert len(program) % 8 == 0


def test_an_unknown_architecture_is_refused() -> None:
    """Asking for a filter for an architecture without a syscall table raises SeccompError."""
    with pytest.raises(seccomp.SeccompError, match="riscv64"):
        seccomp.build_filter(machine="riscv64")


def test_a_deny_errno_outside_the_kernel_range_is_refused() -> None:
    """The kernel clamps errno values above 4095, so the builder refuses them."""
    with pytest.raises(seccomp.SeccompError, match="4096"):
        seccomp.build_filter(machine="x86_64", deny_errno=4096)


def test_installing_a_broken_program_is_refused_before_the_kernel() -> None:
    """A program that is not whole instructions raises SeccompError and installs nothing."""
    with pytest.raises(seccomp.SeccompError, match="not whole instructions"):
        seccomp.install(b"\x06\x00\x00\x00")


# --- the real kernel, in a fresh user namespace like the envelope's ----------------------------

# Everything is imported before the namespace: uid 65534 may not read the interpreter's home.
PRELUDE = """
import ctypes, json, mmap, os, subprocess, sys, threading
from jigcmd.envelope import seccomp, syscalls
libc = ctypes.CDLL(None, use_errno=True)
NR = seccomp.syscall_numbers()

def call(nr, *args):
    result = libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(arg) for arg in args))
    return 0 if result >= 0 else ctypes.get_errno()

def status(field):
    with open("/proc/self/status") as handle:
        return next(line.split()[1] for line in handle if line.startswith(field + ":"))

try:
    syscalls.unshare(syscalls.CLONE_NEWUSER | syscalls.CLONE_NEWNS)
except OSError as exc:
    print("unavailable: unshare(CLONE_NEWUSER):", exc, flush=True)
    sys.exit(3)
print("unshared", flush=True)
sys.stdin.readline()
os.setresgid(0, 0, 0)
os.setgroups([])
os.setresuid(0, 0, 0)
"""


class Outcome(NamedTuple):
    """How a script run in a user namespace ended."""

    code: int
    value: Any  # the JSON value of the last stdout line of a successful run, else None
    stderr: str


def run_in_user_namespace(body: str) -> Outcome:
    """Run `body` in a fresh Python inside a new user namespace mapped 0 → 65534."""
    if os.geteuid() != 0:
        unavailable("needs root to map a user namespace to host uid 65534")
    if platform.machine() not in MACHINES:
        unavailable(f"no seccomp filter for {platform.machine()}")
    code, out, err = run_mapped(PRELUDE + textwrap.dedent(body))
    lines = out.splitlines()
    value = json.loads(lines[-1]) if lines and code == 0 else None
    return Outcome(code, value, err)


@pytest.mark.envelope
def test_every_denied_syscall_is_stopped_by_the_filter_and_not_by_the_kernel() -> None:
    """With a marker errno, every listed call (harmless arguments) returns the marker."""
    code, answers, err = run_in_user_namespace(f"""
        seccomp.install(seccomp.build_filter(deny_errno={MARKER_ERRNO}))
        answers = {{name: call(nr, *[-1] * 6) for name, nr in seccomp.denied_syscalls().items()}}
        answers["clone+CLONE_NEWUSER"] = call(NR["clone"], {CLONE_NEWUSER | CLONE_THREAD})
        answers["personality(ADDR_NO_RANDOMIZE)"] = call(NR["personality"], 0x0040000)
        answers["ioctl(TIOCSTI)"] = call(NR["ioctl"], -1, {TIOCSTI | (1 << 32)})
        answers["ioctl(TIOCLINUX)"] = call(NR["ioctl"], -1, {TIOCLINUX})
        print(json.dumps(answers))
    """)
    assert code == 0, err
    assert answers == dict.fromkeys(answers, MARKER_ERRNO)
    assert len(answers) == len(seccomp.denied_syscalls()) + 4


@pytest.mark.envelope
def test_calls_that_pass_the_filter_reach_the_kernel() -> None:
    """Allowed variants get the kernel's own errors, not the filter's marker."""
    code, answers, err = run_in_user_namespace(f"""
        seccomp.install(seccomp.build_filter(deny_errno={MARKER_ERRNO}))
        print(json.dumps({{
            "clone(CLONE_THREAD)": call(NR["clone"], {CLONE_THREAD}),
            "ioctl(FIONREAD)": call(NR["ioctl"], -1, {FIONREAD}),
            "personality(query)": call(NR["personality"], 0xFFFFFFFF),
            "clone3": call(NR["clone3"], -1, -1),
        }}))
    """)
    assert code == 0, err
    assert answers == {
        "clone(CLONE_THREAD)": errno.EINVAL,
        "ioctl(FIONREAD)": errno.EBADF,
        "personality(query)": 0,
        "clone3": errno.ENOSYS,
    }


@pytest.mark.envelope
def test_the_filter_denies_with_eperm_what_the_namespace_root_could_otherwise_do() -> None:
    """A tmpfs mount succeeds before the filter and fails with EPERM after it, as does unshare."""
    code, answers, err = run_in_user_namespace("""
        syscalls.mount("jigcmd-probe", "/mnt", "tmpfs", 0)
        syscalls.umount2("/mnt", 0)
        seccomp.install()
        try:
            syscalls.mount("jigcmd-probe", "/mnt", "tmpfs", 0)
            mount = 0
        except OSError as exc:
            mount = exc.errno
        print(json.dumps({
            "mount": mount,
            "unshare(CLONE_NEWUSER)": call(NR["unshare"], syscalls.CLONE_NEWUSER),
            "setns": call(NR["setns"], 0, 0),
            "no_new_privs": status("NoNewPrivs"),
            "seccomp": status("Seccomp"),
        }))
    """)
    assert code == 0, err
    assert answers == {
        "mount": errno.EPERM,
        "unshare(CLONE_NEWUSER)": errno.EPERM,
        "setns": errno.EPERM,
        "no_new_privs": "1",
        "seccomp": "2",
    }


@pytest.mark.envelope
def test_fork_threads_and_subprocesses_still_work_under_the_filter() -> None:
    """os.fork, a Python thread and subprocess.run all work with clone3 denied."""
    code, answers, err = run_in_user_namespace("""
        seccomp.install()
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        forked = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        box = []
        thread = threading.Thread(target=box.append, args=("ran",))
        thread.start()
        thread.join()
        child = subprocess.run(["/bin/echo", "child"], capture_output=True, check=False)
        print(json.dumps([forked, box, child.returncode, child.stdout.decode()]))
    """)
    assert code == 0, err
    assert answers == [7, ["ran"], 0, "child\n"]


@pytest.mark.envelope
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x32 ABI exists only on x86_64")
def test_an_x32_system_call_kills_the_process() -> None:
    """getpid through the x32 ABI ends the process with SIGSYS."""
    code, _, err = run_in_user_namespace("""
        seccomp.install()
        call(39 | 0x40000000)
        print(json.dumps("survived"))
    """)
    assert code == -signal.SIGSYS, err


@pytest.mark.envelope
@pytest.mark.skipif(platform.machine() != "x86_64", reason="int 0x80 is the x86 i386 ABI")
def test_an_i386_system_call_kills_the_process() -> None:
    """getpid through int 0x80 (the i386 ABI) ends the process with SIGSYS."""
    code, _, err = run_in_user_namespace("""
        page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(bytes.fromhex("b814000000cd80c3"))  # mov eax, 20; int 0x80; ret
        getpid_i386 = ctypes.CFUNCTYPE(ctypes.c_int)(
            ctypes.addressof(ctypes.c_char.from_buffer(page))
        )
        assert getpid_i386() == os.getpid()
        seccomp.install()
        getpid_i386()
        print(json.dumps("survived"))
    """)
    assert code == -signal.SIGSYS, err
