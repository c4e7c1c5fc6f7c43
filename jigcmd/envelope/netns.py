"""The envelope's network namespace: a fresh one per run, with `lo` up and nothing else.

Decision (measured on this machine, medians): the supervisor unshares CLONE_NEWNET while it
is host root, *before* it clones pid 1 into a new user namespace (and then returns to the
host's namespace). The namespace is therefore owned by
the host's user namespace, so even root-of-its-own-userns candidate code holds no
CAP_NET_ADMIN over it and cannot reconfigure it; and it has no name and no bind mount, so it
disappears with its last process and cannot leak (nothing to remove, nothing for recovery
to find). Creating it costs ~0.6 ms.

pyroute2 encodes the netlink request that brings `lo` up; it is built once (in the zygote)
and sent on a plain netlink socket (~0.2 ms). The alternatives were measured and rejected
for the hot path: `pyroute2.netns.create` (named, forks helper processes) 16 ms;
`IPRoute()` (an asyncio loop per socket in pyroute2 0.9) 8 ms per use.

This is the only module that imports pyroute2, and only in a short-lived child the zygote
forks as it starts (`encode_in_child`): neither the server nor the zygote ever holds it.
pyroute2 is 24 MB of resident memory and 370 modules; in the server it made up most of an
idle tree's memory, and in the zygote it would weigh on every process forked from it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import socket
import struct
import time

from jigcmd.envelope import syscalls as sc
from jigcmd.fdwait import readable

__all__ = [
    "LoopbackEncoding",
    "NetnsError",
    "encode_in_child",
    "enter_fresh",
    "host_namespace",
    "loopback_request",
    "loopback_up",
    "preload",
    "use_request",
]

_IFF_UP = 0x1
_NLMSG_ERROR = 2
_LOOPBACK_INDEX = 1  # the kernel creates lo first in every new network namespace


class NetnsError(OSError):
    """Raised when the fresh network namespace cannot be created or configured."""


@functools.cache
def loopback_request() -> bytes:
    """The RTM_NEWLINK request that sets IFF_UP on `lo`, encoded by pyroute2."""
    from pyroute2.netlink import NLM_F_ACK, NLM_F_REQUEST  # noqa: PLC0415 - only in the child that encodes it (encode_in_child)
    from pyroute2.netlink.rtnl import RTM_NEWLINK  # noqa: PLC0415 - likewise
    from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg  # noqa: PLC0415 - likewise

    message = ifinfmsg()
    message["index"] = _LOOPBACK_INDEX
    message["flags"] = _IFF_UP
    message["change"] = _IFF_UP
    message["header"]["type"] = RTM_NEWLINK
    message["header"]["flags"] = NLM_F_REQUEST | NLM_F_ACK
    message["header"]["sequence_number"] = 1
    message.encode()
    return bytes(message.data)


_encoded: bytes | None = None


def preload() -> bytes:
    """Import pyroute2 and encode the request now, off every run's path (~130 ms once)."""
    return loopback_request()


class LoopbackEncoding:
    """pyroute2 encoding the lo request in a forked child, while the caller goes on.

    Fork only from a single-threaded process (the zygote, as it starts): the zygote never
    imports pyroute2 itself, and its other start-up steps overlap the child's import.
    """

    def __init__(self) -> None:
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        child = os.fork()
        if child == 0:
            code = 1
            try:
                os.close(read_end)
                os.write(write_end, loopback_request())
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        self._child = child
        self._read_end = read_end

    def result(self, timeout: float = 30.0) -> bytes:
        """The encoded request, once the child has written it (bounded by `timeout`)."""
        try:
            request = b""
            deadline = time.monotonic() + timeout
            while True:
                wait = max(0.0, deadline - time.monotonic())
                ready = readable(self._read_end, wait)
                chunk = os.read(self._read_end, 4096) if ready else b""
                if not chunk:
                    break
                request += chunk
        finally:
            os.close(self._read_end)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._child, signal.SIGKILL)
            # SIGCHLD keeps its default in the zygote, so the child stays ours to reap: its
            # pid cannot be reused before this wait, and the kill above cannot hit a stranger.
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._child, 0)
        if not request:
            raise NetnsError(errno.EPROTO, "the netlink request for lo could not be encoded")
        return request


def encode_in_child(timeout: float = 30.0) -> bytes:
    """The request, encoded by pyroute2 in a forked child, so the caller never imports it."""
    return LoopbackEncoding().result(timeout)


def use_request(request: bytes) -> None:
    """Use `request` (encoded by another process with `loopback_request`) from now on."""
    global _encoded  # noqa: PLW0603 - set once at zygote start, read by every envelope
    _encoded = request


def enter_fresh() -> None:
    """Move the calling process into a new network namespace whose only link, `lo`, is up."""
    try:
        sc.unshare(sc.CLONE_NEWNET)
    except OSError as exc:
        raise NetnsError(exc.errno, f"cannot create a network namespace: {exc.strerror}") from exc
    loopback_up()


def loopback_up() -> None:
    """Bring `lo` of the current (fresh) network namespace up, and check it is up."""
    request = _encoded if _encoded is not None else loopback_request()
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, 0) as nl:
            nl.send(request)
            reply = nl.recv(4096)
    except OSError as exc:
        raise NetnsError(exc.errno, f"netlink request for lo failed: {exc.strerror}") from exc
    # struct nlmsghdr (16 bytes) then, for an ACK, struct nlmsgerr whose error is 0.
    kind = struct.unpack_from("=H", reply, 4)[0] if len(reply) >= 20 else None
    # The ACK is the kernel's answer to the change itself (dev_change_flags returned 0): no
    # second look at the flags is needed (it cost a socket and an ioctl per envelope).
    code = -struct.unpack_from("=i", reply, 16)[0] if kind == _NLMSG_ERROR else errno.EPROTO
    if code:
        raise NetnsError(code, f"bringing lo up failed: {os.strerror(code)}")


def host_namespace() -> int:
    """A descriptor of the network namespace this process started in, opened once.

    The zygote returns to it after making each envelope's; pid 1 closes its copy with every
    other descriptor of the zygote (`spawning`).
    """
    global _host  # noqa: PLW0603 - opened once per process, by the first envelope
    if _host < 0:
        _host = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    return _host


_host = -1
