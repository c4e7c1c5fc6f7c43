"""Forked probes: a child process really does each envelope step, the parent reads how it went.

Each probe returns None when the step worked and the child's error otherwise. Probes fork, so
call them before anything starts threads (the end-to-end check, which starts anyio, comes last).
A child that hangs is killed after a bounded wait; nothing a probe creates outlives it (the
namespaces die with their last process, the mounts with their mount namespace).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import time
from collections.abc import Callable

from jigcmd.envelope import hostids, idmap, netns, seccomp
from jigcmd.envelope import syscalls as sc
from jigcmd.fdwait import readable

__all__ = ["probe_namespaces", "probe_network", "probe_seccomp", "probe_userns", "read_text"]

_TIMEOUT = 5.0
# The envelope's namespaces, unshared in one call as the supervisor's entrant does.
_NAMESPACES = (
    ("user", sc.CLONE_NEWUSER),
    ("mount", sc.CLONE_NEWNS),
    ("pid", sc.CLONE_NEWPID),
    ("ipc", sc.CLONE_NEWIPC),
    ("uts", sc.CLONE_NEWUTS),
    ("cgroup", sc.CLONE_NEWCGROUP),
)
# Mounted over inside the probe's private mount namespace only; the host's /tmp is untouched.
_SCRATCH = "/tmp"  # noqa: S108 - the probe's private mount namespace, not the host's /tmp


def read_text(path: str) -> str | None:
    """A small /proc or /sys file's text, or None when it does not exist or cannot be read."""
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return f"{errno.errorcode.get(exc.errno, exc.errno)} ({exc.strerror})"
    return str(exc) or type(exc).__name__


class _Child:
    """A forked child reporting over a pipe: lines `step`, then `fail step\\tdetail` or EOF."""

    def __init__(self, body: Callable[[int, int], None]) -> None:
        self.status_r, status_w = os.pipe2(os.O_CLOEXEC)
        self.go_r, self.go_w = os.pipe2(os.O_CLOEXEC)
        self.buffer = b""
        self.deadline = time.monotonic() + _TIMEOUT
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.status_r)
            os.close(self.go_w)
            try:
                body(status_w, self.go_r)
            except BaseException:  # noqa: BLE001 - the body reports its own failure; never return
                os._exit(1)
            os._exit(0)
        os.close(status_w)
        os.close(self.go_r)

    def line(self) -> str | None:
        """The child's next status line, or None at EOF or timeout."""
        while b"\n" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0 or not readable(self.status_r, left):
                return None
            chunk = os.read(self.status_r, 4096)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", "replace")

    def go(self) -> None:
        os.write(self.go_w, b"g")

    def finish(self, error: str | None) -> str | None:
        """Wait for the child (killing it when it overstays); the first error found wins."""
        # Closing the go pipe first unblocks a child still waiting for the parent.
        os.close(self.go_w)
        while (line := self.line()) is not None:
            if error is None and line.startswith("fail "):
                error = line[5:].replace("\t", ": ", 1)
        os.close(self.status_r)
        if time.monotonic() >= self.deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            error = error or f"the probe did not finish within {_TIMEOUT:.0f} s"
        _, status = os.waitpid(self.pid, 0)
        if error is None and status != 0:
            error = f"the probe child ended with wait status {status}"
        return error


def _fail(fd: int, step: str, exc: BaseException) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, f"fail {step}\t{_describe(exc)}\n".encode("utf-8", "replace"))
    os._exit(1)


def _simple(step: str, action: Callable[[], None]) -> str | None:
    def body(fd: int, _go_r: int) -> None:
        try:
            action()
        except BaseException as exc:  # noqa: BLE001 - a forked probe reports any failure with its step
            _fail(fd, step, exc)

    return _Child(body).finish(None)


def probe_userns() -> str | None:
    """unshare(CLONE_NEWUSER) in a child."""
    return _simple("unshare(CLONE_NEWUSER)", lambda: sc.unshare(sc.CLONE_NEWUSER))


def probe_network() -> str | None:
    """A new network namespace with `lo` up, in a child, the way the entrant makes it."""
    # Encoded here, as the server does: importing pyroute2 in the child is slow (seconds
    # under emulation) and would eat the probe's time limit.
    netns.use_request(netns.preload())
    if idmap.rootless():
        # Without root the network namespace comes with (and is owned by) a user namespace.
        def rootless_network() -> None:
            sc.unshare(sc.CLONE_NEWUSER | sc.CLONE_NEWNET)
            netns.loopback_up()

        return _simple("network namespace", rootless_network)
    return _simple("network namespace", netns.enter_fresh)


def probe_seccomp() -> str | None:
    """Install the envelope's filter in a child; unshare must then fail with EPERM."""

    def action() -> None:
        seccomp.install()
        try:
            sc.unshare(sc.CLONE_NEWUTS)
        except PermissionError:
            return
        raise OSError(0, "unshare was allowed under the filter")

    return _simple("install the filter", action)


def _refused_kinds() -> list[str]:
    """Which namespace kinds cannot be unshared, each tried alone in a grandchild."""
    refused = []
    for name, flag in _NAMESPACES:
        pid = os.fork()
        if pid == 0:
            try:
                sc.unshare(flag)
            except OSError:
                os._exit(1)
            os._exit(0)
        if os.waitpid(pid, 0)[1] != 0:
            refused.append(name)
    return refused


def _pid1(fd: int) -> None:
    """Pid 1 of the new namespaces: what init does before the candidate's root is finished."""
    step = "pid namespace"
    try:
        if os.getpid() != 1:
            raise OSError(0, f"init has pid {os.getpid()}, not 1")
        step = "uts namespace (sethostname)"
        socket.sethostname("jigcmd-doctor")
        step = "mount namespace (make mounts private)"
        sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
        step = "mount namespace (mount a tmpfs)"
        sc.mount("tmpfs", _SCRATCH, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "size=64k,mode=0700")
        os.mkdir(_SCRATCH + "/proc")
        step = "mount a fresh /proc"
        sc.mount(
            "proc",
            _SCRATCH + "/proc",
            "proc",
            sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC,
            "hidepid=invisible,subset=pid",
        )
    except BaseException as exc:  # noqa: BLE001 - a forked probe reports any failure with its step
        _fail(fd, step, exc)


def _entrant(fd: int, go_r: int) -> None:
    """Unshare like the supervisor's entrant, wait for the id maps, fork pid 1."""
    step = "drop supplementary groups"
    try:
        if not idmap.rootless():
            os.setgroups([])
        step = "unshare user+mount+pid+ipc+uts+cgroup"
        flags = 0
        for _, flag in _NAMESPACES:
            flags |= flag
        try:
            sc.unshare(flags)
        except OSError as exc:
            refused = ", ".join(_refused_kinds()) or "none alone"
            raise OSError(exc.errno, f"{exc.strerror}; refused alone: {refused}") from exc
        os.write(fd, b"unshared\n")
        step = "wait for id maps"
        if os.read(go_r, 1) != b"g":
            raise OSError(0, "the parent went away")
        step = "become root of the user namespace"
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
        step = "fork pid 1"
        pid = os.fork()
        if pid == 0:
            _pid1(fd)
            os._exit(0)
        if os.waitpid(pid, 0)[1] != 0:
            os._exit(1)  # pid 1 reported its own failure
    except BaseException as exc:  # noqa: BLE001 - a forked probe reports any failure with its step
        _fail(fd, step, exc)


def probe_namespaces() -> str | None:
    """The envelope's namespaces as the supervisor builds them, up to a fresh /proc in pid 1."""
    child = _Child(_entrant)
    line = child.line()
    if line != "unshared":
        error = line[5:].replace("\t", ": ", 1) if line and line.startswith("fail ") else None
        return child.finish(error or "the child stopped before unsharing")
    try:
        ids = hostids.take("candidate")
    except hostids.HostIdError as exc:
        return child.finish(f"host ids: {exc}")
    try:
        idmap.write_id_maps(child.pid, (ids.uid, ids.gid))
    except OSError as exc:
        hostids.let_go(ids)
        return child.finish(f"user namespace id maps: {_describe(exc)}")
    child.go()
    try:
        return child.finish(None)
    finally:
        # The probe's namespace is gone with its pid 1 (`finish` waits for it).
        hostids.let_go(ids)
