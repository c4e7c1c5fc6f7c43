"""Messages between the server, the zygote and a run's supervisor, and how fds travel with them.

Every message is one msgpack frame prefixed by its 4-byte big-endian length, sent over a
unix stream socket. A `Launch` carries the run's stdio descriptors as SCM_RIGHTS.
"""

from __future__ import annotations

import array
import socket
import struct
from typing import Literal

import msgspec

from jigcmd.envelope.api import ScratchRead
from jigcmd.journal.identity import ProcessIdentity
from jigcmd.plan import RunPlan

__all__ = [
    "INIT_LOST",
    "Cancel",
    "Ended",
    "Failed",
    "Finished",
    "FrameReader",
    "Go",
    "Launch",
    "Message",
    "Ready",
    "Started",
    "Warm",
    "recv_message",
    "send_message",
]

_MAX_FRAME = 8 * 1024 * 1024
_HEADER = struct.Struct(">I")


class Launch(msgspec.Struct, frozen=True, tag="launch"):
    """Server → supervisor (prepared, or through the zygote): run `plan`.

    fds: stdin, stdout, stderr, the gate, the run socket and, when reserved, the envelope
    slot's lock. The candidate execs only after a byte arrives on the gate (EOF: withdrawn).
    With `operation_id` the supervisor closes that journal row (`root_run`, `operation_id` in
    `state_dir`) as uncertain if the server dies mid-run.
    """

    run_id: str
    plan: RunPlan
    operation_id: str | None = None
    root_run: str = ""
    state_dir: str | None = None


class Warm(msgspec.Struct, frozen=True, tag="warm"):
    """Server → zygote: keep `pool` envelopes prepared for plans shaped like `plan`."""

    plan: RunPlan
    pool: int = 1


class Ready(msgspec.Struct, frozen=True, tag="ready"):
    """Zygote → server: a prepared supervisor's socket (the one fd) to send a `Launch` to.

    Who will serve a launch sent there, known before any request: the envelope's id (its
    cgroup job is `jigcmd-<id>`, at `cgroup_paths`) and its supervisor (None if it could not
    be identified). The server records them with the request's journal row.
    """

    envelope_id: str
    supervisor: ProcessIdentity | None
    cgroup_paths: tuple[str, ...]


class Go(msgspec.Struct, frozen=True, tag="go"):
    """Supervisor → init → candidate: stage `plan` (fds: stdin, stdout, stderr, gate)."""

    plan: RunPlan


class Cancel(msgspec.Struct, frozen=True, tag="cancel"):
    """Server → supervisor: stop the whole tree now."""


class Started(msgspec.Struct, frozen=True, tag="started"):
    """Supervisor → server: the envelope is complete and the candidate was exec'd."""

    supervisor_pid: int
    init_pid: int
    cgroup_paths: tuple[str, ...]
    netns: str
    setup_ms: float


class Ended(msgspec.Struct, frozen=True, tag="ended"):
    """Supervisor → server: the candidate ended (or was stopped); the cleanup starts now."""

    exit_code: int | None
    signal: str | None
    stop_reason: Literal["exited", "deadline", "cancelled"]


class Finished(msgspec.Struct, frozen=True, tag="finished"):
    """Supervisor → server: the tree is gone and every resource was released (or not)."""

    exit_code: int | None
    signal: str | None
    stop_reason: Literal["exited", "deadline", "cancelled"]
    wall_ms: float
    cpu_ms: float | None
    peak_memory_bytes: int | None
    oom_killed: bool
    pids_limit_hit: bool
    cleanup_complete: bool
    cleanup_problems: tuple[str, ...] = ()
    # The plan's scratch file as read after the run (None when the plan named none).
    scratch_file: ScratchRead | None = None


# `Failed.step` when pid 1 died without reporting how the candidate ended: the candidate ran
# (it may have done anything), and nobody knows how it ended.
INIT_LOST = "pid 1"


class Failed(msgspec.Struct, frozen=True, tag="failed"):
    """Supervisor → server: a piece of the envelope could not be established; nothing ran.

    With `step` `INIT_LOST` the candidate did run, and its end is unknown.
    """

    step: str
    error: str
    cleanup_complete: bool
    cleanup_problems: tuple[str, ...] = ()


Message = Launch | Warm | Ready | Go | Cancel | Started | Ended | Finished | Failed

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Message)


class FrameReader:
    """Sans-IO: bytes in, whole messages out, with the same frame bound as `recv_message`.

    For the server's side, which reads a non-blocking run socket in whatever pieces arrive.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        """Append bytes as they came off the socket."""
        self._buffer += data

    def next(self) -> Message | None:
        """The next whole message, or None until more bytes arrive (ValueError when too long)."""
        if len(self._buffer) < _HEADER.size:
            return None
        (length,) = _HEADER.unpack_from(self._buffer)
        _check_length(length)
        end = _HEADER.size + length
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[_HEADER.size : end])
        del self._buffer[:end]
        return _decoder.decode(body)


def _check_length(length: int) -> None:
    if length > _MAX_FRAME:
        raise ValueError(f"control frame of {length} bytes exceeds {_MAX_FRAME}")


def send_message(sock: socket.socket, message: Message, fds: list[int] | None = None) -> None:
    """Send one framed message, with `fds` attached to its first byte."""
    body = _encoder.encode(message)
    data = _HEADER.pack(len(body)) + body
    if fds:
        sent = sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        data = data[sent:]
    if data:
        sock.sendall(data)


def recv_message(sock: socket.socket, max_fds: int = 0) -> tuple[Message, list[int]] | None:
    """Receive one framed message and any fds sent with it; None on a clean EOF."""
    fds: list[int] = []
    header = _recv_exact(sock, _HEADER.size, fds, max_fds)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    _check_length(length)
    body = _recv_exact(sock, length, fds, 0)
    if body is None:
        raise EOFError("control socket closed mid-frame")
    return _decoder.decode(body), fds


def _recv_exact(sock: socket.socket, size: int, fds: list[int], max_fds: int) -> bytes | None:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        if max_fds and not fds:
            data, ancdata, _flags, _addr = sock.recvmsg(
                remaining, socket.CMSG_SPACE(max_fds * array.array("i").itemsize)
            )
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    received = array.array("i")
                    received.frombytes(payload[: len(payload) - len(payload) % received.itemsize])
                    fds.extend(received)
        else:
            data = sock.recv(remaining)
        if not data:
            if remaining == size and not chunks:
                return None
            raise EOFError("control socket closed mid-frame")
        chunks.append(data)
        remaining -= len(data)
    return b"".join(chunks)
