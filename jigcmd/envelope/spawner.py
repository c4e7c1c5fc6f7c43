"""The spawner: a process forked once from the zygote that only clones pid 1s for it.

Why: a pid 1 cloned from the zygote shares the zygote's pages until one side writes, and the
zygote's loop wrote ~410 of them per call while pid 1s were alive, each a copy-on-write
fault (docs/envelope.md, "A clone-only spawner"). Forked once, as soon as the zygote's
image is complete (`gc.freeze`), the spawner shares the zygote's pages with nobody else; the
zygote's own writes then fault once per page, not once per call.

Each pid 1 is cloned with `CLONE_PARENT`: it is the zygote's child, not the spawner's, so
the zygote supervises it exactly as one of its own clones (pidfd, `wait4` from its one loop),
and `PR_SET_PDEATHSIG` names its parent, the zygote's one thread: the zygote's death still
takes every pid 1 along. The spawner's death takes none of them: they live on, supervised.

What crosses the socket (SOCK_SEQPACKET: one request, one reply): a `pid1.Blueprint` (the
envelope's shape, no request's data) with pid 1's three channel ends; back, pid 1's pid and
the cgroup it was born in, or why the clone failed. The spawner holds nothing else: not the
server's socket (every descriptor but its own socket is closed as it starts), no other
envelope's descriptors (each request's are closed once pid 1 is cloned), no candidate data.

When the spawner goes (killed, no reply within `_REPLY_S`, a frame that is not one), the
zygote lets it go for good and clones pid 1 itself from then on, as it did before the
spawner; so it does when the kernel refuses the clone's flags (`_REFUSED`), and for one
envelope when the spawner's clone fails otherwise. A preparation whose request was in
flight fails (fenced and released like any failed step); a pid 1 cloned for it is a child of
the zygote whose pid was never told, which `sweep` reaps.
"""

from __future__ import annotations

import array
import contextlib
import errno
import os
import signal
import socket
from collections.abc import Container
from typing import NamedTuple, NoReturn

from jigcmd import trace
from jigcmd.envelope import pid1, records, spawning
from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.failure import StepError
from jigcmd.envelope.pid1 import Blueprint
from jigcmd.fdwait import readable

__all__ = ["Cloned", "Spawner", "sweep"]

_PR_SET_PDEATHSIG = 1
# Pid 1's control socket end, its status pipe's write end, its go pipe's read end.
_CHANNELS = 3
_MAX_FRAME = 1 << 20
# How long the zygote waits for a clone (~1 ms) before it gives the spawner up.
_REPLY_S = 5.0
# The kernel refuses the clone itself (clone3's flags with CLONE_PARENT, or clone3 hidden):
# the zygote clones pid 1 itself from then on.
_REFUSED = (errno.EINVAL, errno.EPERM, errno.ENOSYS)


class Cloned(NamedTuple):
    """Spawner → zygote: pid 1's pid and the cgroup2 directory it was born in, or 0 and why."""

    pid: int
    born_in: str | None
    errno: int = 0
    error: str = ""


_BLUEPRINT_READER = records.Reader[Blueprint](Blueprint)
_BLUEPRINT_WRITER = records.Writer[Blueprint](Blueprint)
_CLONED_READER = records.Reader[Cloned](Cloned)


class Spawner:
    """The zygote's side: the spawner's pid, pidfd (for its loop) and socket."""

    def __init__(self, pid: int, sock: socket.socket, pidfd: int) -> None:
        self.pid = pid
        self.pidfd = pidfd
        self._sock: socket.socket | None = sock
        # Set when the spawner went away with a request: a pid 1 may be left to `sweep`.
        self.orphans = False

    @classmethod
    def start(cls) -> Spawner | None:
        """Fork the spawner from the calling (single-threaded) zygote; None if it cannot be."""
        zygote = os.getpid()
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            pid = os.fork()
        except OSError as exc:
            trace.mark(f"zygote: no spawner: {exc}")
            return None
        if pid == 0:
            try:
                _serve(theirs, zygote)
            finally:
                os._exit(0)
        theirs.close()
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            ours.close()
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        return cls(pid, ours, pidfd)

    @property
    def usable(self) -> bool:
        """Whether pid 1s are still asked of the spawner (False once it was let go)."""
        return self._sock is not None

    def clone(self, blueprint: Blueprint, channels: tuple[int, int, int]) -> int | None:
        """Pid 1 cloned by the spawner from `blueprint`, with `channels`; its pid.

        None when the caller must clone it itself: the spawner is let go of (`usable`) or its
        clone failed. Raises StepError when the spawner went away with the request.
        """
        sock = self._sock
        if sock is None:
            return None
        frame = records.dumps_plain(_BLUEPRINT_WRITER.plain(blueprint))
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", channels))]
        try:
            # A datagram is queued whole or not at all: on failure nothing was cloned.
            sock.sendmsg([frame], rights)
        except OSError as exc:
            self.let_go(f"request not sent: {exc}")
            return None
        ready = readable(sock.fileno(), _REPLY_S)
        data = b""
        with contextlib.suppress(OSError):
            data = sock.recv(4096) if ready else b""
        try:
            cloned = _CLONED_READER.loads(data)
        except records.FrameError as exc:
            # Killed, hung or garbled mid-clone: whether a pid 1 exists is unknown.
            self.orphans = True
            self.let_go(f"no reply: {exc}")
            raise StepError("create namespaces", "the spawner went away while cloning") from exc
        if cloned.pid > 0:
            return cloned.pid
        trace.mark(f"zygote: the spawner's clone failed: {cloned.error}")
        if cloned.errno in _REFUSED:
            self.let_go(f"refused: {cloned.error}")
        return None

    def let_go(self, why: str) -> None:
        """Stop asking the spawner (it is killed, if it still runs); its pidfd turns readable."""
        trace.mark(f"zygote: spawner let go: {why}")
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def reap(self) -> None:
        """Collect the spawner once its pidfd turned readable (it is gone)."""
        self.let_go("gone")
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        os.close(self.pidfd)
        self.pidfd = -1


def sweep(known: Container[int]) -> int:
    """Reap every exited child not in `known` (pid 1s whose pid the spawner never told).

    A look first (`WNOWAIT`): a known child's exit is its envelope's to collect (`wait4`
    with its usage), so the sweep stops at one and comes back after the loop's next turn.
    Returns how many it reaped.
    """
    reaped = 0
    while True:
        try:
            exited = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return reaped
        if exited is None or exited.si_pid in known:
            return reaped
        with contextlib.suppress(ChildProcessError):
            os.waitpid(exited.si_pid, 0)
        reaped += 1
        trace.mark("zygote: orphan reaped")


# -- the spawner process ---------------------------------------------------------------


def _serve(sock: socket.socket, zygote: int) -> None:
    """Clone pid 1s on request until the zygote closes the socket (or dies)."""
    sc.set_name("jigcmd-spawner")
    # Dies with the zygote; one that died before this was set is not its parent any more.
    sc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != zygote:
        return
    # Nothing of the zygote's but stdio: not the server's socket, no envelope's descriptors.
    spawning.close_all_but((sock.fileno(),))
    # Once here rather than in every pid 1 (see pid1.py); this loop installs no handler.
    pid1.drop_handlers_for_clones()
    while True:
        try:
            received = _receive(sock)
        except OSError:
            return
        if received is None:
            return  # the zygote let go of us
        cloned = _clone(*received)
        try:
            sock.send(records.dumps_plain(tuple(cloned)))
        except OSError:
            return


def _receive(sock: socket.socket) -> tuple[bytes, list[int]] | None:
    """One request and its descriptors; None at EOF. A request cut short reads as empty."""
    space = socket.CMSG_SPACE(_CHANNELS * array.array("i").itemsize)
    data, ancdata, flags, _addr = sock.recvmsg(_MAX_FRAME, space, socket.MSG_CMSG_CLOEXEC)
    fds = array.array("i")
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if not data and not fds:
        return None
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        return b"", []
    return data, list(fds)


def _clone(data: bytes, fds: list[int]) -> Cloned:
    """Clone pid 1 for one request; in pid 1 this never returns."""
    try:
        if not data:
            return Cloned(0, None, errno.EMSGSIZE, "the request was cut short")
        if len(fds) != _CHANNELS:
            return Cloned(0, None, errno.EBADMSG, f"{len(fds)} descriptors, not {_CHANNELS}")
        try:
            blueprint = _BLUEPRINT_READER.loads(data)
        except records.FrameError as exc:
            return Cloned(0, None, errno.EBADMSG, str(exc))
        channels = (fds[0], fds[1], fds[2])
        try:
            pid, born_in = spawning.spawn_sibling(blueprint.membership.unified, channels)
        except StepError as exc:
            return Cloned(0, None, 0, str(exc))
        except OSError as exc:
            return Cloned(0, None, exc.errno or 0, str(exc))
        if pid == 0:
            _become_init(blueprint, channels, born_in)
        return Cloned(pid, born_in)
    finally:
        for fd in fds:
            os.close(fd)


def _become_init(
    blueprint: Blueprint, channels: tuple[int, int, int], born_in: str | None
) -> NoReturn:
    control, status_w, go_r = channels
    try:
        pid1.Init(blueprint, socket.socket(fileno=control), status_w).start(born_in, go_r)
    finally:
        os._exit(1)  # a clone of the spawner must never return into its loop
