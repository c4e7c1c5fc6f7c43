"""Messages between the server, the zygote and pid 1, and how fds travel with them.

Every message is one frame prefixed by its 4-byte big-endian length, sent over a unix stream
socket: the `marshal` bytes of the tuple `(tag, fields)`, where `fields` is the message's
NamedTuple as a plain tuple. A `Launch` carries the run's stdio descriptors as SCM_RIGHTS.

Each side reads and writes frames with its own `Codec`, of the same types: the zygote and
pid 1 with `jigcmd.envelope.marshalcodec` (the standard library alone, so that msgspec stays
out of the image every pid 1 is cloned from), the server with msgspec's validation
(`jigcmd.envelope.wire`). Both check every field of what they read against these types, and
refuse a frame that does not match (ValueError) before anything acts on it.
"""

from __future__ import annotations

import array
import os
import socket
import struct
from typing import Literal, NamedTuple, Protocol

from jigcmd.envelope.scratchfile import ScratchRead
from jigcmd.journal.identity import ProcessIdentity
from jigcmd.plan import RunPlan

__all__ = [
    "INIT_LOST",
    "REFILL_AFTER_MS",
    "TAGS",
    "Answered",
    "Cancel",
    "Codec",
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
    "frame",
    "recv_message",
    "send_message",
    "tag_of",
]

_MAX_FRAME = 8 * 1024 * 1024
_HEADER = struct.Struct(">I")


class Launch(NamedTuple):
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


# How long after a run's end the zygote refills its pool when no `Answered` came.
REFILL_AFTER_MS = 30.0


class Warm(NamedTuple):
    """Server → zygote: keep `pool` envelopes prepared for plans shaped like `plan`.

    After a run's end the refill waits for `Answered`, or `refill_after_ms` at most.
    """

    plan: RunPlan
    pool: int = 1
    refill_after_ms: float = REFILL_AFTER_MS


class Answered(NamedTuple):
    """Server → zygote: the answer of a call whose run ended was written; refill now.

    A hint, never needed for correctness: without it the refill waits `refill_after_ms`.
    """


class Ready(NamedTuple):
    """Zygote → server: a prepared supervisor's socket (the one fd) to send a `Launch` to.

    Who will serve a launch sent there, known before any request: the envelope's id (its
    cgroup job is `jigcmd-<id>`, at `cgroup_paths`) and its supervisor (None if it could not
    be identified). The server records them with the request's journal row.
    """

    envelope_id: str
    supervisor: ProcessIdentity | None
    cgroup_paths: tuple[str, ...]


class Go(NamedTuple):
    """Supervisor → init → candidate: the request's own data (fds: stdin, stdout, stderr, gate).

    The rest of the run's plan is the one pid 1 was prepared with: the supervisor sends a go
    only to an envelope prepared for the launch's shape (`lifecycle.shape`). Plain fields,
    so that pid 1 reads them with little code (docs/envelope.md, "Pid 1's steps, one by one").
    """

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    cwd: str
    files: tuple[tuple[str, str], ...]
    cpus: tuple[int, ...]
    # The plan's `program`: an exact path to execute instead of `argv[0]`, or empty.
    program: str


class Cancel(NamedTuple):
    """Server → supervisor: stop the whole tree now, for `reason` (the run's `stop_reason`).

    `deadline`: the last caller waiting for a shared operation saw its own deadline pass
    before the run's (`jigcmd.command.sharing`); the run is stopped as at its deadline.
    """

    reason: Literal["cancelled", "deadline"] = "cancelled"


class Started(NamedTuple):
    """Supervisor → server: the envelope is complete and the candidate was exec'd."""

    supervisor_pid: int
    init_pid: int
    cgroup_paths: tuple[str, ...]
    netns: str
    # From the launch taken to the candidate's start as pid 1 took it (docs/evidence.md).
    setup_ms: float


class Ended(NamedTuple):
    """Supervisor → server: the candidate ended (or was stopped); the cleanup starts now."""

    exit_code: int | None
    signal: str | None
    stop_reason: Literal["exited", "deadline", "cancelled"]


class Finished(NamedTuple):
    """Supervisor → server: the tree is gone and every resource was released (or not)."""

    exit_code: int | None
    signal: str | None
    stop_reason: Literal["exited", "deadline", "cancelled"]
    # From the candidate's start to its end as pid 1 saw it, or to the stop's kill.
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


class Failed(NamedTuple):
    """Supervisor → server: a piece of the envelope could not be established; nothing ran.

    With `step` `INIT_LOST` the candidate did run, and its end is unknown.
    """

    step: str
    error: str
    cleanup_complete: bool
    cleanup_problems: tuple[str, ...] = ()


Message = Launch | Warm | Answered | Ready | Go | Cancel | Started | Ended | Finished | Failed

TAGS: dict[str, type[Message]] = {
    "launch": Launch,
    "warm": Warm,
    "answered": Answered,
    "ready": Ready,
    "go": Go,
    "cancel": Cancel,
    "started": Started,
    "ended": Ended,
    "finished": Finished,
    "failed": Failed,
}
_TAG_OF = {kind: tag for tag, kind in TAGS.items()}


def tag_of(message: Message) -> str:
    """The tag a frame names `message`'s type with."""
    return _TAG_OF[type(message)]


class Codec(Protocol):
    """How one side turns a message into a frame's body and back (see the module docstring)."""

    def encode(self, message: Message) -> bytes:
        """The frame body of `message`."""
        ...

    def decode(self, body: bytes) -> Message:
        """The message a frame body holds; ValueError when it is not one, field by field."""
        ...


class FrameReader:
    """Sans-IO: bytes in, whole messages out, with the same frame bound as `recv_message`.

    For the server's side, which reads a non-blocking run socket in whatever pieces arrive.
    """

    def __init__(self, codec: Codec) -> None:
        self._buffer = bytearray()
        self._codec = codec

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
        return self._codec.decode(body)


def _check_length(length: int) -> None:
    if length > _MAX_FRAME:
        raise ValueError(f"control frame of {length} bytes exceeds {_MAX_FRAME}")


def frame(message: Message, *, codec: Codec) -> bytes:
    """`message` as one frame on the wire: its length, then its encoding."""
    body = codec.encode(message)
    return _HEADER.pack(len(body)) + body


def send_message(
    sock: socket.socket, message: Message, fds: list[int] | None = None, *, codec: Codec
) -> None:
    """Send one framed message, with `fds` attached to its first byte."""
    data = frame(message, codec=codec)
    if fds:
        sent = sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        data = data[sent:]
    if data:
        sock.sendall(data)


def recv_message(
    sock: socket.socket, max_fds: int = 0, *, codec: Codec
) -> tuple[Message, list[int]] | None:
    """Receive one framed message and any fds sent with it; None on a clean EOF.

    A frame refused (too long, or not a message: ValueError) is refused with its descriptors:
    they are closed, not handed to anything.
    """
    fds: list[int] = []
    header = _recv_exact(sock, _HEADER.size, fds, max_fds)
    if header is None:
        return None
    try:
        (length,) = _HEADER.unpack(header)
        _check_length(length)
        body = _recv_exact(sock, length, fds, 0)
        if body is None:
            raise EOFError("control socket closed mid-frame")
        return codec.decode(body), fds
    except (ValueError, EOFError):
        for fd in fds:
            os.close(fd)
        raise


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
