"""The anyio stdio shell: reads frames, feeds the sans-IO session, runs calls as tasks.

Reads use non-blocking `os.read` after `anyio.wait_readable`; every frame answered from one
read is written with a single `os.write` when the pipe accepts it, and a writer task finishes
partial writes.

Two ways a session ends. End of input means the caller has finished writing: every call
already read runs to its end (each is bounded by its deadline) and is answered, then the
server returns. Coordinator loss (the reader of the output went away: EPIPE, or a pipe or
socket whose reader closed; SIGTERM, SIGINT or SIGHUP) fences instead: running calls are asked
to stop, get a short grace period to record and report how they ended, and the server returns
well within two seconds.
"""

from __future__ import annotations

import logging
import mmap
import os
import signal
from collections.abc import Callable
from typing import Final, NamedTuple

import anyio
import anyio.abc
import anyio.lowlevel
import msgspec

from jigcmd import trace
from jigcmd.cancel import CancelSignal
from jigcmd.errors import Code, JigError
from jigcmd.policy.digests import operation_signature
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.commands import RunResult
from jigcmd.protocol.dialect import DEFAULT_BUDGET_BYTES
from jigcmd.protocol.framing import Frame, LineFramer, Oversized
from jigcmd.protocol.session import (
    Call,
    Cancel,
    Dispatch,
    Fetch,
    Lookup,
    ProtocolChoice,
    Resource,
    Send,
    Session,
    Warn,
)
from jigcmd.server.backend import CommandBackend, Progress, ToolInfo
from jigcmd.server.fds import ProtocolFds, claim_protocol_fds
from jigcmd.server.hostpaths import HostPaths
from jigcmd.server.output import MAX_BACKLOG_BYTES, Writer
from jigcmd.server.stopsignals import watch_stop_signals
from jigcmd.signames import signal_name

__all__ = ["SessionEnd", "serve_stdio"]

logger = logging.getLogger("jigcmd.server")

READ_SIZE: Final = 1 << 20
# Time running calls get to stop and report after the coordinator is lost, and for the last
# frames to leave; together well under the two seconds a caller may wait for exit.
STOP_GRACE_S: Final = 1.2
DRAIN_GRACE_S: Final = 0.3


class SessionEnd(NamedTuple):
    """How a session ended: at the end of its input (or a signal, a lost reader), and how
    many frames it had read by then."""

    eof: bool
    frames: int


async def serve_stdio(
    backend: CommandBackend,
    *,
    protocol: ProtocolChoice = "auto",
    server_name: str = "jigcmd",
    server_version: str = "0",
    slot: str | None = None,
    fds: ProtocolFds | None = None,
    remember: int | None = None,
    root_run: str = "",
    result_budget: int = DEFAULT_BUDGET_BYTES,
    host_paths: HostPaths | None = None,
    on_lost: Callable[[], None] | None = None,
) -> SessionEnd:
    """Serve one stdio session until EOF or SIGTERM; claims fds 0 and 1 unless `fds` is given.

    `remember` bounds the finished operations the session keeps for replay (see `Session`);
    `root_run` is the caller's run the session belongs to (the scope of operation identity);
    `result_budget` the bytes of JSON each MCP tool result fits in; `host_paths` are taken
    out of every refusal and tool description the peer reads; `on_lost` is called when the
    coordinator is lost, before the calls in flight are cancelled. Returns how the session
    ended, for the front to say so (an input that ended before any request).
    """
    if fds is None:
        fds = claim_protocol_fds()
    paths = host_paths or HostPaths({})
    session = Session(
        _scrubbed(backend.tools(), paths),
        signature=operation_signature,
        protocol=protocol,
        server_name=server_name,
        server_version=server_version,
        session_tag=f"{os.getpid()}x{os.urandom(4).hex()}",
        slot=slot,
        remember=remember,
        root_run=root_run,
        result_budget=result_budget,
    )
    logger.debug("serving stdio (protocol=%s)", protocol)
    server = _Server(backend, session, fds, paths, on_lost)
    try:
        await server.serve()
    finally:
        fds.release()
    return SessionEnd(eof=server.eof, frames=server.frames)


def _scrubbed(tools: list[ToolInfo], paths: HostPaths) -> list[ToolInfo]:
    """The catalog with the host's paths out of each unavailability reason."""
    return [
        msgspec.structs.replace(tool, unavailable=paths.scrub(tool.unavailable))
        if tool.unavailable is not None
        else tool
        for tool in tools
    ]


class _Server:
    """One session's IO: the read loop, call tasks and shutdown."""

    def __init__(
        self,
        backend: CommandBackend,
        session: Session,
        fds: ProtocolFds,
        paths: HostPaths,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self._backend = backend
        self._on_lost = on_lost
        self._paths = paths
        self._session = session
        self._fds = fds
        self._framer = LineFramer()
        self._writer = Writer(fds.write_fd, pollable=fds.output_pollable(), input_fd=fds.read_fd)
        # Set at end of input (finish what was read) or when the coordinator is lost.
        self._stop = anyio.Event()
        # Set with `_lost_reason` when the coordinator is lost: fence what is running.
        self._lost = anyio.Event()
        self._lost_reason = ""
        # The calls running, by `_key`: their request id, or their task id once it is one.
        self._cancels: dict[tuple[str, jsonrpc.Id], CancelSignal] = {}
        self._idle = anyio.Event()
        self._idle.set()
        self._tasks: anyio.abc.TaskGroup | None = None
        self.eof = False
        self.frames = 0

    async def serve(self) -> None:
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            tasks.start_soon(self._writer.run)
            await tasks.start(watch_stop_signals, self._signalled)
            tasks.start_soon(self._watch_output)
            tasks.start_soon(self._read_loop)
            tasks.start_soon(self._watch_tools)
            await self._stop.wait()
            if not self._lost.is_set():
                await self._finish_calls()
            if self._lost.is_set():
                await self._fence_calls()
            with anyio.move_on_after(DRAIN_GRACE_S):
                await self._writer.drain()
            tasks.cancel_scope.cancel()

    async def _finish_calls(self) -> None:
        """End of input: wait for every call already read, unless the coordinator is lost."""
        async with anyio.create_task_group() as waiting:

            async def until_lost() -> None:
                await self._lost.wait()
                waiting.cancel_scope.cancel()

            waiting.start_soon(until_lost)
            # Nothing starts a call after end of input, so `_idle` is not replaced meanwhile.
            await self._idle.wait()
            waiting.cancel_scope.cancel()

    async def _fence_calls(self) -> None:
        """Coordinator loss: stop every running call and give it a moment to record its end."""
        if self._cancels:
            logger.warning(
                "coordinator lost (%s): fencing %d call(s) in flight",
                self._lost_reason,
                len(self._cancels),
            )
        else:
            logger.info("coordinator lost (%s); stopping", self._lost_reason)
        if self._on_lost is not None:
            # First: the last cancel here then stops its work, kept for nobody elsewhere.
            self._on_lost()
        for cancel in self._cancels.values():
            cancel.set()
        with anyio.move_on_after(STOP_GRACE_S):
            await self._idle.wait()

    def _lose(self, reason: str) -> None:
        if not self._lost.is_set():
            self._lost_reason = reason
            self._lost.set()
        self._stop.set()

    def _signalled(self, signum: signal.Signals) -> None:
        self._lose(f"received {signal_name(signum)}")

    async def _watch_output(self) -> None:
        async with anyio.create_task_group() as watching:
            watching.start_soon(self._writer.watch_reader)
            await self._writer.lost.wait()
            watching.cancel_scope.cancel()
        self._lose("the reader of stdout went away")

    async def _read_loop(self) -> None:
        fd = self._fds.read_fd
        pollable = self._fds.input_pollable()
        # One buffer for every read: `os.read` of 1 MiB allocates (mmap) and shrinks
        # (mremap, munmap) a fresh object per call; only the bytes read are copied out.
        # Anonymous pages: only those a read ever filled take memory (a bytearray is zeroed).
        buffer = mmap.mmap(-1, READ_SIZE)
        view = memoryview(buffer)
        while True:
            if pollable:
                await anyio.wait_readable(fd)
                trace.mark("server: readable")
            else:
                await anyio.lowlevel.checkpoint()
            try:
                chunk = bytes(view[: os.readv(fd, (buffer,))])
            except BlockingIOError:
                continue
            except OSError as exc:
                logger.warning("protocol input failed: %s", exc)
                chunk = b""
            if not chunk:
                self.eof = True
                await self._handle(self._framer.close())
                self._writer.flush()
                logger.debug("end of input; finishing the calls already read")
                self._stop.set()
                return
            await self._handle(self._framer.feed(chunk))
            self._writer.flush()

    async def _handle(self, events: list[Frame | Oversized]) -> None:
        session = self._session
        writer = self._writer
        for event in events:
            self.frames += 1
            if writer.backlog > MAX_BACKLOG_BYTES:
                # The peer is not reading its answers: read nothing more until it does.
                await writer.wait_for_room()
            if type(event) is Oversized:
                writer.send(session.oversized(event.size, event.head, event.tail))
                continue
            assert type(event) is Frame
            try:
                actions = session.receive(event.data)
            except Exception:
                # A bug in the protocol core must not end the session or corrupt the wire.
                logger.exception("protocol core failed on a frame")
                writer.send(jsonrpc.encode_error(None, jsonrpc.INTERNAL_ERROR, "Internal error"))
                continue
            for action in actions:
                if type(action) is Send:
                    writer.send(action.data)
                elif type(action) is Dispatch:
                    trace.mark("server: dispatch")
                    self._start(action.call)
                elif type(action) is Cancel:
                    key = _key(action.request_id, action.task_id)
                    if key in self._cancels:
                        # Applied after every call read before it has reached the backend
                        # (tasks start in order): a join read just before the cancel of the
                        # request that started the operation is already one of its waiters.
                        self._tasks_group().start_soon(_set, self._cancels[key])
                elif type(action) is Lookup:
                    self._tasks_group().start_soon(self._look_up, action)
                elif type(action) is Fetch:
                    self._tasks_group().start_soon(self._fetch, action)
                elif type(action) is Warn:
                    logger.warning("%s", action.message)

    async def _fetch(self, fetch: Fetch) -> None:
        """Read one per-run resource off the loop and answer with it (or why not)."""
        found: Resource | str
        try:
            data, mime_type = await anyio.to_thread.run_sync(
                self._backend.read_resource, fetch.scope, fetch.uri
            )
            found = Resource(uri=fetch.uri, mime_type=mime_type, data=data)
        except LookupError as missing:
            found = str(missing)
        except OSError:
            logger.exception("reading resource %s failed", fetch.uri)
            found = "the resource could not be read"
        self._writer.send(self._session.fetched(fetch.request_id, found))
        self._writer.flush()

    async def _watch_tools(self) -> None:
        """Send the dialect's notice each time the backend's catalog changes (re-admission)."""
        async for tools in self._backend.tool_changes():
            self._writer.send(self._session.tools_changed(_scrubbed(tools, self._paths)))
            self._writer.flush()

    def _tasks_group(self) -> anyio.abc.TaskGroup:
        assert self._tasks is not None
        return self._tasks

    def _start(self, call: Call) -> None:
        # A signal: the call's waits are woken by it without a task each (`jigcmd.cancel`).
        cancel = CancelSignal()
        if self._lost.is_set():
            cancel.set()
        self._cancels[_key(call.request_id, call.task_id)] = cancel
        if self._idle.is_set():
            self._idle = anyio.Event()
        self._tasks_group().start_soon(self._run_call, call, cancel)

    async def _look_up(self, lookup: Lookup) -> None:
        """Answer from the journal's record (a task this session does not hold)."""
        try:
            found = await self._backend.recorded(lookup.operation_id, root_run=lookup.root_run)
        except Exception:
            logger.exception("reading the record of %s failed", lookup.operation_id)
            self._writer.send(self._session.lookup_failed(lookup))
        else:
            self._writer.send(self._session.recorded(lookup, found))
        self._writer.flush()

    async def _run_call(self, call: Call, cancel: CancelSignal) -> None:
        reporter: Progress | None = None
        if call.progress_token is not None:

            async def report(
                message: str, elapsed_ms: int | None = None, total_ms: int | None = None
            ) -> None:
                self._writer.send(self._session.progress(call, message, elapsed_ms, total_ms))
                self._writer.flush()

            reporter = report

        async def owned(created_unix_ms: int) -> None:
            # The journal began the operation: it runs (the session words its busy refusal
            # so), and a task's creation can be answered now.
            frame = self._session.owned(call, created_unix_ms)
            if frame:
                self._writer.send(frame)
                self._writer.flush()

        outcome: RunResult | JigError
        try:
            outcome = await self._backend.run(
                call.input,
                operation_id=call.operation_id,
                deadline_unix_ms=call.deadline_unix_ms,
                cancel=cancel,
                progress=reporter,
                signature=call.signature,
                context=call.context,
                root_run=call.root_run,
                # MCP hosts call tools in parallel: a call waits for a free envelope slot.
                wait_for_slot=call.dialect == "mcp",
                # What a model reads: per-test results and the run's resources.
                detailed=call.dialect == "mcp",
                owned=owned,
                trace_context=call.trace,
            )
        except JigError as error:
            # The operator's stderr may name host paths; the peer never reads them.
            outcome = self._paths.scrub_error(error)
        except Exception:
            logger.exception("command backend failed on operation %s", call.operation_id)
            outcome = JigError(
                Code.UNCERTAIN, "internal error in the command service; the outcome is unknown"
            )
        finally:
            del self._cancels[_key(call.request_id, call.task_id)]
            if not self._cancels:
                self._idle.set()
        self._writer.send(self._session.finish(call, outcome))
        self._writer.flush()
        self._backend.answered()


def _key(request_id: jsonrpc.Id, task_id: str | None) -> tuple[str, jsonrpc.Id]:
    """A running call's key: a task's request id may be reused once its creation is answered."""
    return ("task", task_id) if task_id is not None else ("request", request_id)


async def _set(cancel: CancelSignal) -> None:
    cancel.set()
