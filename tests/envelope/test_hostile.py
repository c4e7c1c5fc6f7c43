"""The hostile suite, escapes: candidates that reach for the network, the host or the kernel.

Every case runs the whole command path (`CommandService`: validation, plan, envelope,
evidence) on a traced executor (`test_hostile_limits.py` has the candidates that try to
starve or confuse it). After every case the evidence must be schema-valid with
`cleanup: "complete"`, nothing of the envelope may be left on the host (cgroups, processes,
network or pid namespace, mounts), and the Bun binary must be unchanged (its stat per case,
its hash once per module).
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

import jigcmd
from jigcmd.command.runtime import find_runtime
from tests.envelope import hostile_candidates as cand
from tests.envelope.hostile_harness import (
    Attempt,
)
from tests.envelope.hostile_runner import Hostile, HostServices, refused

pytestmark = pytest.mark.envelope

SECRET = f"jigcmd-secret-{uuid.uuid4().hex}"
x86_64_only = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="raw system call numbers are x86_64's"
)


@pytest.fixture(scope="module", autouse=True)
def secret_environment() -> Iterator[None]:
    """A credential in the test process's environment while the executor starts and runs."""
    os.environ["JIGCMD_TEST_SECRET"] = SECRET
    yield
    del os.environ["JIGCMD_TEST_SECRET"]


# -- network ---------------------------------------------------------------------------


@x86_64_only
async def test_a_candidate_cannot_reach_host_loopback_or_unix_services(
    hostile: Hostile, host_services: HostServices
) -> None:
    """Host loopback TCP, an abstract and a path unix socket are all unreachable."""
    case = await hostile.run(cand.HOST_LOOPBACK, args=host_services.args())
    # The envelope's own loopback is up and empty; abstract sockets are per network namespace.
    refused(case, "tcp 127.0.0.1", "ECONNREFUSED")
    refused(case, "tcp [::1]", "ECONNREFUSED", "EADDRNOTAVAIL", "ENETUNREACH")
    refused(case, "abstract unix socket", "ECONNREFUSED")
    refused(case, "unix socket path", "ENOENT")
    assert not case.attempts["node:net 127.0.0.1"].ok
    assert host_services.connections() == []


@x86_64_only
async def test_a_candidate_cannot_reach_an_external_address(hostile: Hostile) -> None:
    """Public IPv4 and IPv6 addresses are unreachable: the envelope has no route at all."""
    source = (
        'import { connectInet, connectInet6 } from "./probe.ts";\n'
        'connectInet("tcp 1.1.1.1:443", "1.1.1.1", 443);\n'
        'connectInet("tcp 8.8.8.8:53", "8.8.8.8", 53);\n'
        'connectInet6("tcp [2606:4700::1111]:443", '
        "[0x26, 0x06, 0x47, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11, 0x11], 443);\n"
    )
    case = await hostile.run(source)
    refused(case, "tcp 1.1.1.1:443", "ENETUNREACH")
    refused(case, "tcp 8.8.8.8:53", "ENETUNREACH")
    refused(case, "tcp [2606:4700::1111]:443", "ENETUNREACH", "EADDRNOTAVAIL")


async def test_a_candidate_cannot_resolve_names(hostile: Hostile) -> None:
    """DNS lookups fail (/etc names localhost only, no route to a server); a timeout counts too."""
    source = (
        'import { attemptAsync } from "./probe.ts";\n'
        'import dns from "node:dns";\n'
        "const within = (p: Promise<unknown>) => Promise.race([p, "
        'new Promise((_, reject) => setTimeout(() => reject(new Error("timeout")), 1500))]);\n'
        'await attemptAsync("Bun.dns", () => within(Bun.dns.lookup("example.com")));\n'
        'await attemptAsync("node:dns", () => within(dns.promises.resolve4("example.com")));\n'
    )
    case = await hostile.run(source)
    assert not case.attempts["Bun.dns"].ok
    assert not case.attempts["node:dns"].ok


# -- host secrets and devices ----------------------------------------------------------


async def test_a_candidate_cannot_read_host_secrets(hostile: Hostile, tmp_path: Path) -> None:
    """Secret files under /root and /tmp, pid 1's memory and environment stay out of reach."""
    name = f"jigcmd-secret-{uuid.uuid4().hex[:12]}.txt"
    paths = [f"/root/{name}", f"/tmp/{name}", str(tmp_path / name)]
    try:
        for path in paths:
            await anyio.Path(path).write_text(SECRET)
            # Readable by anyone: only the envelope's view keeps it out.
            await anyio.Path(path).chmod(0o644)
        case = await hostile.run(cand.READ_SECRETS, args=[SECRET, *paths])
    finally:
        for path in paths:
            await anyio.Path(path).unlink(missing_ok=True)
    for path in paths:
        for prefix in ("", "/oldroot", "/proc/1/root", "/proc/self/root", "/proc/1/cwd/.."):
            assert not case.attempts["read " + prefix + path].ok
        refused(case, "read " + path, "ENOENT")
    for file in ("environ", "mem", "maps"):
        refused(case, f"read /proc/1/{file}", "ENOENT", "EACCES", "EPERM")
    assert not case.evidence.stdout.truncated
    assert int(case.attempts["files searched"].detail) > 0
    # Nothing read anywhere held the token (the candidate got it only as an argument).
    assert [n for n in case.attempts if n.startswith("found ")] == []
    assert SECRET not in case.evidence.stdout.text
    assert SECRET not in case.evidence.stderr.text


def _host_install_paths() -> set[str]:
    """Where this host keeps Python, Bun, the checkout and homes: none may name a mount."""
    bun = os.path.realpath(find_runtime().path)
    return {
        sys.prefix,
        os.path.realpath(sys.prefix),
        os.path.dirname(bun),
        str(Path(jigcmd.__file__).resolve().parents[1]),
        "/home/",
        "/root",
        os.path.expanduser("~"),
    }


async def test_no_mount_the_candidate_sees_names_a_host_path(hostile: Hostile) -> None:
    """Every field of every mountinfo line is free of the install prefix, the checkout and any
    home: the runtime is bound from jigcmd's staging tmpfs, not from where pip put it."""
    case = await hostile.run(cand.MOUNT_TABLES)
    assert case.evidence.exit_code == 0, case.evidence.stderr.text
    count = int(case.attempts["mountinfo self"].detail)
    lines = [case.attempts[f"mountinfo self {index}"].detail for index in range(count)]
    threads = int(case.attempts["mountinfo thread-self"].detail)
    assert [case.attempts[f"mountinfo thread-self {i}"].detail for i in range(threads)] == lines
    # pid 1 is hidden from the candidate (hidepid, non-dumpable): nothing of it to read.
    assert not case.attempts["mountinfo 1"].ok
    table = "\n".join(lines)
    forbidden = _host_install_paths()
    assert all(len(line) < 300 for line in lines), "a line may have been cut short"
    for line in lines:
        for fragment in forbidden:
            assert fragment not in line, (fragment, line)
    runtime = [line for line in lines if " - tmpfs jigcmd-runtime " in line]
    roots_and_targets = {tuple(line.split()[3:5]) for line in runtime}
    assert ("/opt/bun/bin/bun", "/opt/bun/bin/bun") in roots_and_targets, table
    # Every runtime file: the same path inside the copy as where the candidate sees it.
    assert all(root == target for root, target in roots_and_targets), roots_and_targets
    assert case.attempts["exe"].detail == "/opt/bun/bin/bun"


async def test_host_devices_are_absent(hostile: Hostile) -> None:
    """/dev holds only null, zero, urandom and the stdio links; disks, memory and kmsg are gone."""
    devices = [
        "sda",
        "vda",
        "nvme0n1",
        "mem",
        "kmem",
        "port",
        "kmsg",
        "tty",
        "console",
        "kvm",
        "net/tun",
        "fuse",
        "shm",
        "mqueue",
        "hugepages",
        "cpu/0/msr",
        "vsock",
    ]
    source = (
        'import { attempt, sys, cstr, emit } from "./probe.ts";\n'
        'import { openSync, readdirSync } from "node:fs";\n'
        'emit("dev", true, JSON.stringify(readdirSync("/dev").sort()));\n'
        "for (const name of process.argv.slice(2)) "
        'attempt("open /dev/" + name, () => openSync("/dev/" + name, "r"));\n'
        'attempt("read /dev/urandom", () => openSync("/dev/urandom", "r"));\n'
    )
    case = await hostile.run(source, args=devices)
    assert case.attempts["dev"].detail == (
        '["fd","null","stderr","stdin","stdout","urandom","zero"]'
    )
    for name in devices:
        refused(case, "open /dev/" + name, "ENOENT")
    assert case.attempts["read /dev/urandom"].ok


@x86_64_only
async def test_a_watch_on_dev_null_sees_no_host_process_write_it(hostile: Hostile) -> None:
    """/dev/null, /dev/zero and /dev/urandom are nodes of the envelope's own, not the host's
    inodes: a candidate's inotify watch sees its own writes of /dev/null, none of the host's."""
    host = {name: os.stat(f"/dev/{name}") for name in ("null", "zero", "urandom")}
    # Writes /dev/null all through the run, in a process of its own (no GIL shared).
    writer = await anyio.open_process(
        ["/bin/sh", "-c", "while :; do echo x > /dev/null; done"],
        stdin=None,
        stdout=None,
        stderr=None,
    )
    try:
        case = await hostile.run(cand.DEVICE_WATCH, args=["200"])
        assert writer.returncode is None, "the host's writer stopped before the run ended"
    finally:
        writer.kill()
        await writer.wait()
    for name, found in host.items():
        assert case.attempts["identity " + name].detail != f"{found.st_dev}:{found.st_ino}"
    assert case.attempts["writes seen"].detail == "200"


@x86_64_only
async def test_a_candidate_cannot_create_a_device_node(hostile: Hostile) -> None:
    """mknod of the host's first disk fails, in scratch too."""
    case = await hostile.run(cand.SYSCALL, args=["133", "s:/tmp/sda", str(0o60600), str(0x800)])
    refused(case, "syscall", "EPERM")


# -- writes ----------------------------------------------------------------------------


async def test_a_candidate_cannot_write_outside_scratch_or_change_itself_or_the_runtime(
    hostile: Hostile,
) -> None:
    """Every write outside /tmp fails; main.ts hashes as sent; /tmp takes writes."""
    case = await hostile.run(cand.WRITE_OUTSIDE)
    writes = {
        name: a
        for name, a in case.attempts.items()
        if name not in ("write /tmp/ok", "hash main.ts")
    }
    assert len(writes) == 13 + 2 * 6 + 2
    leaked = {name: a.detail for name, a in writes.items() if a.ok}
    assert leaked == {}
    assert {a.detail for a in writes.values()} <= {
        "EROFS",
        "EACCES",
        "EPERM",
        "ENOENT",
        "EXDEV",
        "ETXTBSY",
    }
    assert case.attempts["write /tmp/ok"].ok
    sent = hashlib.sha256(cand.WRITE_OUTSIDE.encode()).hexdigest()
    assert case.attempts["hash main.ts"] == Attempt("hash main.ts", ok=True, detail=sent)


async def test_the_environment_and_open_descriptors_hold_nothing_of_the_host(
    hostile: Hostile,
) -> None:
    """The environment is Bun's fixed one; fds past stdio are Bun's own, never sockets or files."""
    source = (
        'import { emit } from "./probe.ts";\n'
        'import { readdirSync, readlinkSync } from "node:fs";\n'
        'emit("env", true, JSON.stringify(process.env));\n'
        'for (const fd of readdirSync("/proc/self/fd")) {\n'
        '  try { emit("fd " + fd, true, readlinkSync("/proc/self/fd/" + fd)); } catch { }\n'
        "}\n"
    )
    case = await hostile.run(source)
    assert case.attempts["env"].detail == '{"BUN_RUNTIME_TRANSPILER_CACHE_PATH":"0"}'
    fds = {int(n.split()[1]): a.detail for n, a in case.attempts.items() if n.startswith("fd ")}
    assert all(fds[fd].startswith("pipe:[") for fd in (0, 1, 2))
    assert all(
        target.startswith(("anon_inode:", "/dev/urandom", "/proc/"))
        for fd, target in fds.items()
        if fd > 2
    ), fds
    assert SECRET not in case.evidence.stdout.text


# -- forbidden kernel interfaces -------------------------------------------------------

DENIED_SYSCALLS = [
    pytest.param(["101", "16", "1"], ("EPERM",), id="ptrace-attach-pid-1"),
    pytest.param(["101", "0"], ("EPERM",), id="ptrace-traceme"),
    pytest.param(["310", "1", "0", "0", "0", "0", "0"], ("EPERM",), id="process_vm_readv"),
    pytest.param(["272", str(0x10000000)], ("EPERM",), id="unshare-user-namespace"),
    pytest.param(["272", str(0x00020000)], ("EPERM",), id="unshare-mount-namespace"),
    pytest.param(
        ["56", str(0x10000000 | 17), "0", "0", "0", "0"], ("EPERM",), id="clone-new-user-namespace"
    ),
    pytest.param(["435", "b:88", "88"], ("ENOSYS",), id="clone3"),
    pytest.param(["308", "0", "0"], ("EPERM",), id="setns"),
    pytest.param(["165", "s:none", "s:/tmp", "s:tmpfs", "0", "0"], ("EPERM",), id="mount"),
    pytest.param(["165", "s:/", "s:/tmp", "0", "4096", "0"], ("EPERM",), id="bind-mount"),
    pytest.param(["166", "s:/work", "2"], ("EPERM",), id="umount-candidate"),
    pytest.param(["155", "s:/tmp", "s:/tmp"], ("EPERM",), id="pivot_root"),
    pytest.param(["161", "s:/tmp"], ("EPERM",), id="chroot"),
    pytest.param(["430", "s:tmpfs", "0"], ("EPERM",), id="fsopen"),
    pytest.param(["428", "-100", "s:/", "1"], ("EPERM",), id="open_tree"),
    pytest.param(["250", "0", "-3", "1"], ("EPERM",), id="keyctl"),
    pytest.param(["248", "s:user", "s:jigcmd", "s:x", "1", "-4"], ("EPERM",), id="add_key"),
    pytest.param(["249", "s:user", "s:jigcmd", "0", "-4"], ("EPERM",), id="request_key"),
    pytest.param(["425", "8", "b:120"], ("EPERM",), id="io_uring_setup"),
    pytest.param(["426", "0", "1", "0", "0", "0", "0"], ("EPERM",), id="io_uring_enter"),
    pytest.param(["427", "0", "0", "0", "0"], ("EPERM",), id="io_uring_register"),
    # Native AIO: a context's events count against the host-wide fs.aio-max-nr.
    pytest.param(["206", "1", "b:8"], ("EPERM",), id="io_setup"),
    pytest.param(["206", "65536", "b:8"], ("EPERM",), id="io_setup-all-of-aio-max-nr"),
    pytest.param(["209", "0", "1", "b:8"], ("EPERM",), id="io_submit"),
    pytest.param(["333", "0", "1", "1", "b:32", "0", "0"], ("EPERM",), id="io_pgetevents"),
    pytest.param(["321", "0", "b:128", "128"], ("EPERM",), id="bpf"),
    pytest.param(["298", "b:128", "0", "-1", "-1", "0"], ("EPERM",), id="perf_event_open"),
    pytest.param(["323", "0"], ("EPERM",), id="userfaultfd"),
    pytest.param(["246", "0", "0", "0", "0"], ("EPERM",), id="kexec_load"),
    pytest.param(["313", "0", "s:", "0"], ("EPERM",), id="finit_module"),
    pytest.param(["176", "s:ext4", "0"], ("EPERM",), id="delete_module"),
    pytest.param(["169", str(0xFEE1DEAD), "672274793", "0"], ("EPERM",), id="reboot-cad-off"),
    pytest.param(["227", "0", "b:16"], ("EPERM",), id="clock_settime"),
    pytest.param(["164", "b:16", "0"], ("EPERM",), id="settimeofday"),
]


@x86_64_only
@pytest.mark.parametrize(("call", "codes"), DENIED_SYSCALLS)
async def test_a_forbidden_system_call_fails(
    hostile: Hostile, call: list[str], codes: tuple[str, ...]
) -> None:
    """A raw system call (bun:ffi → libc syscall) that could reshape the envelope is refused."""
    case = await hostile.run(cand.SYSCALL, args=call)
    refused(case, "syscall", *codes)
    assert case.evidence.exit_code == 0


# Families a candidate may not create (some ignore the network namespace: vsock reaches the
# hypervisor host), with a socket type each family would accept.
EXCLUDED_SOCKET_FAMILIES = {
    "AF_VSOCK": "40:1:0",
    "AF_VSOCK seqpacket": "40:5:0",
    "AF_PACKET": "17:3:768",
    "AF_XDP": "44:3:0",
    "AF_CAN": "29:3:1",
    "AF_BLUETOOTH": "31:1:3",
    "AF_ALG": "38:5:0",
    "AF_KEY": "15:3:2",
    "AF_TIPC": "30:5:0",
    "AF_RDS": "21:5:0",
    "AF_QIPCRTR": "42:2:0",
}
# Netlink protocols other than NETLINK_ROUTE: uevents are broadcast from the host.
EXCLUDED_NETLINK = {
    "NETLINK_KOBJECT_UEVENT": "16:3:15",
    "NETLINK_AUDIT": "16:3:9",
    "NETLINK_SOCK_DIAG": "16:3:4",
    "NETLINK_GENERIC": "16:3:16",
}
ALLOWED_SOCKETS = {
    "AF_UNIX stream": "1:1:0",
    "AF_UNIX datagram": "1:2:0",
    "AF_INET stream": "2:1:0",
    "AF_INET6 datagram": "10:2:0",
    "NETLINK_ROUTE": "16:3:0",
}


@x86_64_only
async def test_socket_families_outside_the_allow_list_are_refused_inside_the_envelope(
    hostile: Hostile,
) -> None:
    """socket and socketpair fail with EAFNOSUPPORT for vsock, packet, xdp, …; netlink but route
    with EPROTONOSUPPORT; unix, inet, inet6 and route still work, as does os.networkInterfaces."""
    triples = [*EXCLUDED_SOCKET_FAMILIES.values(), *EXCLUDED_NETLINK.values()]
    case = await hostile.run(cand.SOCKET_FAMILIES, args=[*triples, *ALLOWED_SOCKETS.values()])
    assert case.evidence.exit_code == 0, case.evidence.stderr.text
    for triple in EXCLUDED_SOCKET_FAMILIES.values():
        refused(case, f"socket {triple}", "EAFNOSUPPORT")
        refused(case, f"socketpair {triple}", "EAFNOSUPPORT")
    for triple in EXCLUDED_NETLINK.values():
        refused(case, f"socket {triple}", "EPROTONOSUPPORT")
    for name, triple in ALLOWED_SOCKETS.items():
        assert case.attempts[f"socket {triple}"].ok, (name, case.attempts[f"socket {triple}"])
    # socketpair is a unix-domain call; the kernel itself refuses inet pairs.
    assert case.attempts["socketpair 1:1:0"].ok
    assert case.attempts["networkInterfaces"].ok
    assert case.attempts["networkInterfaces"].detail == "lo"


@x86_64_only
async def test_a_foreign_abi_system_call_kills_the_candidate(hostile: Hostile) -> None:
    """An x32 system call (getpid with the x32 bit) is not answered: the process dies of SIGSYS."""
    case = await hostile.run(cand.SYSCALL, args=[str(0x40000000 | 39)])
    assert (case.evidence.signal, case.evidence.stop_reason) == ("SIGSYS", "exited")
    assert "syscall" not in case.attempts


@x86_64_only
async def test_kill_minus_one_reaches_nothing_outside(hostile: Hostile) -> None:
    """kill(-1, SIGKILL) spares the caller and cannot touch a host process of the same host uid."""
    # Host uid 65534 was every candidate's (jarvis's runs keep it): a host process of that uid
    # was the closest target; a candidate's own host uid is now leased (hostids.py).
    sentinel = await anyio.open_process(
        ["/bin/cat"], stdin=subprocess.PIPE, stdout=None, stderr=None, user=65534, group=65534
    )
    try:
        source = (
            'import { attemptSys, emit } from "./probe.ts";\n'
            'attemptSys("kill -1", 62, -1, 9);\n'
            'emit("survived", true, "");\n'
        )
        case = await hostile.run(source)
        assert sentinel.returncode is None
    finally:
        assert sentinel.stdin is not None
        await sentinel.stdin.aclose()
        with anyio.fail_after(10):
            status = await sentinel.wait()
    # Killed, cat would end by SIGKILL; closing its stdin ends it with 0.
    assert status == 0
    assert case.attempts["survived"].ok
    assert case.evidence.exit_code == 0


@x86_64_only
async def test_pid_1_cannot_be_read_signalled_traced_or_limited_by_the_candidate(
    hostile: Hostile,
) -> None:
    """Pid 1 reports the end: the candidate can neither see, trace, limit nor signal it."""
    source = (
        'import { attempt, attemptSys, sys } from "./probe.ts";\n'
        'import { openSync, readFileSync } from "node:fs";\n'
        'attempt("read status", () => readFileSync("/proc/1/status", "ascii").length);\n'
        'attempt("open mem", () => openSync("/proc/1/mem", "r"));\n'
        'attempt("read environ", () => readFileSync("/proc/1/environ").length);\n'
        'attemptSys("ptrace attach", 101, 16, 1, 0, 0);\n'
        "const limit = Buffer.alloc(16);\n"
        'attemptSys("prlimit cpu", 302, 1, 0, limit, 0);\n'
        "const pidfd = sys(434, 1, 0).ret;\n"
        'attemptSys("pidfd_getfd", 438, pidfd, 0, 0);\n'
        "for (const signal of [2, 9, 11, 15, 17, 19]) {\n"
        '  attemptSys("kill " + signal, 62, 1, signal);\n'
        "}\n"
        "await Bun.sleep(200);\n"
        'console.log(JSON.stringify({ name: "after", ok: true, detail: "" }));\n'
        "process.exit(7);\n"
    )
    case = await hostile.run(source)
    # Pid 1 outlived every signal and reported the candidate's own exit status.
    assert (case.evidence.exit_code, case.evidence.stop_reason) == (7, "exited")
    assert case.attempts["after"].ok
    # Hidden from the candidate's /proc altogether (hidepid): not even its status shows.
    for name in ("read status", "open mem", "read environ"):
        refused(case, name, "ENOENT", "EACCES")
    refused(case, "ptrace attach", "EPERM")
    refused(case, "prlimit cpu", "EPERM")
    refused(case, "pidfd_getfd", "EPERM")
