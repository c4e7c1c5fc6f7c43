"""The server's side of one run: the candidate's output, the supervisor's reports, the outcome.

`RunCollector` reads both output pipes (capped, draining the rest), listens to the
supervisor's reports, forwards a cancel and turns the end into a `RunOutcome`, only after
the supervisor confirmed the tree is gone and every owned resource released.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Coroutine
from typing import Any

import anyio
import msgspec

from jigcmd import trace
from jigcmd.envelope.api import (
    CapturedStream,
    Ending,
    EnvelopeFailure,
    EnvelopeIdentity,
    FailureKind,
    Hooks,
    OnEnded,
    OnOutput,
    RunOutcome,
)
from jigcmd.envelope.messages import (
    INIT_LOST,
    Cancel,
    Ended,
    Failed,
    Finished,
    FrameReader,
    Message,
    Started,
    send_message,
)
from jigcmd.envelope.wire import MSGSPEC
from jigcmd.evidence import OUTPUT_CAP_BYTES, ResourceReport
from jigcmd.plan import RunPlan

__all__ = ["OUTPUT_PIPE_BYTES", "Capture", "RunCollector"]

# After the supervisor reports the end, every writer of the pipes is dead; this only bounds
# the wait for bytes already in flight.
_DRAIN_AFTER_END = 1.0
# How long past the plan's deadline the supervisor may take to fence and release.
_FINISH_GRACE = 10.0
_READ_CHUNK = 65_536
# While the candidate runs, its output is read every 50 ms, not as it comes: each wake-up
# of the server costs ~0.25 ms of CPU that Bun needs on the same cores (`bun test` writes
# five times). The pipes are enlarged to hold what comes meanwhile; the run's end cuts the
# wait short, and past the cap (where output is dropped) reads follow the writes at once,
# so a chatty candidate is held back at most a batch or two. Through silence the wait
# doubles up to 200 ms, so that a long quiet run costs the server next to nothing.
_OUTPUT_BATCH_S = 0.05
_OUTPUT_BATCH_MAX_S = 0.2
OUTPUT_PIPE_BYTES = 1024 * 1024


def _next_batch(batch: float, *, got_output: bool) -> float:
    """The next wait between reads while the candidate runs (see `_OUTPUT_BATCH_S`)."""
    return _OUTPUT_BATCH_S if got_output else max(batch, min(batch * 2, _OUTPUT_BATCH_MAX_S))


# How long a withdrawn launch's supervisor may take to report its envelope released.
_WITHDRAW_WAIT = 1.0


class Capture:
    def __init__(
        self, fd: int, ending: anyio.Event, on_output: OnOutput | None = None, name: str = ""
    ) -> None:
        self.fd = fd
        self.name = name
        self.on_output = on_output
        os.set_blocking(fd, False)
        self.data = bytearray()
        self.dropped = 0
        self.eof = False
        self.done = anyio.Event()
        self.ending = ending

    def _batching(self) -> bool:
        return len(self.data) < OUTPUT_CAP_BYTES and not self.ending.is_set()

    async def pump(self) -> None:
        batch = _OUTPUT_BATCH_S
        try:
            while True:
                if self._batching():
                    with anyio.move_on_after(batch):
                        await self.ending.wait()
                try:
                    chunk = os.read(self.fd, _READ_CHUNK)
                except BlockingIOError:
                    if self._batching():
                        batch = _next_batch(batch, got_output=False)
                    else:
                        await anyio.wait_readable(self.fd)
                    continue
                batch = _next_batch(batch, got_output=True)
                if not chunk:
                    self.eof = True
                    self.done.set()
                    return
                if self.on_output is not None:
                    self.on_output(self.name, chunk)
                room = OUTPUT_CAP_BYTES - len(self.data)
                if room > 0:
                    self.data += chunk[:room]
                self.dropped += max(0, len(chunk) - max(room, 0))
        finally:
            os.close(self.fd)

    def result(self) -> CapturedStream:
        return CapturedStream(data=bytes(self.data), truncated=self.dropped > 0 or not self.eof)


async def _awaited(work: Coroutine[Any, Any, None]) -> None:
    await work


async def _forward_cancel(
    cancel: anyio.Event, sock: socket.socket, forwarding: anyio.CancelScope
) -> None:
    """Tell the supervisor of the caller's cancel, until the run ends (`forwarding`).

    The run's end cancels `forwarding`, which this task's own scope absorbs, so the task
    ends without an error: a task that ends by a cancel leaves its CancelledError and its
    frames in a reference cycle until the garbage collector runs (docs/performance.md).
    """
    with forwarding:
        await cancel.wait()
        with contextlib.suppress(OSError):
            send_message(sock, Cancel(), codec=MSGSPEC)


class RunCollector:
    def __init__(
        self,
        plan: RunPlan,
        *,
        sock: socket.socket,
        stdout_r: int,
        stderr_r: int,
        cancel: anyio.Event,
        hooks: Hooks,
    ) -> None:
        self.plan = plan
        self.sock = sock
        # Set once the run's end is reported (or the reports stop): output is read at once.
        self.ending = anyio.Event()
        self.stdout = Capture(stdout_r, self.ending, hooks.on_output, "stdout")
        self.stderr = Capture(stderr_r, self.ending, hooks.on_output, "stderr")
        self.cancel = cancel
        self.hooks = hooks
        self.started: Started | None = None
        self.end: Finished | Failed | None = None
        self.frames = FrameReader(MSGSPEC)
        self.callbacks: anyio.abc.TaskGroup
        sock.setblocking(False)

    async def collect(self) -> RunOutcome:
        begin = time.monotonic()
        try:
            # Callbacks (the journal recording the envelope) run beside the run and are
            # awaited, never cancelled, before the outcome is returned.
            async with (
                anyio.create_task_group() as self.callbacks,
                anyio.create_task_group() as tg,
            ):
                forwarding = anyio.CancelScope()
                tg.start_soon(self.stdout.pump)
                tg.start_soon(self.stderr.pump)
                tg.start_soon(_forward_cancel, self.cancel, self.sock, forwarding)
                try:
                    await self._listen()
                finally:
                    self.ending.set()
                forwarding.cancel()
                if not (self.stdout.eof and self.stderr.eof):
                    tg.cancel_scope.cancel()  # a pump still waits: the run ended without EOF
        finally:
            self.sock.close()
        trace.mark("executor: output drained")
        return self._outcome(begin)

    async def abandon(self) -> None:
        """Wait (bounded) for the end report of a withdrawn launch; drop output and errors."""
        try:
            with anyio.move_on_after(_WITHDRAW_WAIT), anyio.CancelScope(shield=True):
                while self.end is None:
                    message = await self._next_message()
                    if message is None:
                        break
                    if isinstance(message, Finished | Failed):
                        self.end = message
        finally:
            self.sock.close()
            os.close(self.stdout.fd)
            os.close(self.stderr.fd)

    async def _listen(self) -> None:
        limit = self.plan.deadline + _FINISH_GRACE
        with anyio.move_on_after(max(0.0, limit - time.monotonic())):
            while self.end is None:
                message = await self._next_message()
                if message is None:
                    return
                if isinstance(message, Started):
                    trace.mark("executor: started")
                    self.started = message
                    if self.hooks.on_started is not None:
                        identity = EnvelopeIdentity(
                            supervisor_pid=message.supervisor_pid,
                            init_pid=message.init_pid,
                            cgroup_paths=message.cgroup_paths,
                            netns=message.netns,
                        )
                        work = self.hooks.on_started(identity)
                        if work is not None:
                            self.callbacks.start_soon(_awaited, work)
                elif isinstance(message, Ended):
                    trace.mark("executor: ended")
                    self.ending.set()
                    if self.hooks.on_ended is not None:
                        self.callbacks.start_soon(self._ended, message, self.hooks.on_ended)
                elif isinstance(message, Finished | Failed):
                    trace.mark("executor: end reported")
                    self.ending.set()
                    self.end = message
        if isinstance(self.end, Finished):
            # Every writer is dead; read what is still in the pipes, bounded in time.
            with anyio.move_on_after(_DRAIN_AFTER_END):
                await self.stdout.done.wait()
                await self.stderr.done.wait()

    async def _ended(self, ended: Ended, on_ended: OnEnded) -> None:
        # Every writer of the pipes is dead or SIGKILLed once the candidate ended (pid 1
        # killed the namespace first): the output completes now, during the cleanup.
        with anyio.move_on_after(_DRAIN_AFTER_END):
            await self.stdout.done.wait()
            await self.stderr.done.wait()
        if not (self.stdout.eof and self.stderr.eof):
            return
        await on_ended(
            Ending(
                stdout=self.stdout.result(),
                stderr=self.stderr.result(),
                exit_code=ended.exit_code,
                signal=ended.signal,
                stop_reason=ended.stop_reason,
            )
        )

    async def _next_message(self) -> Message | None:
        """The supervisor's next report; None once the reports stop (EOF, or a bad frame)."""
        while True:
            try:
                message = self.frames.next()
            except (ValueError, msgspec.DecodeError):
                # Oversized or garbled: nothing after it can be trusted, as if it went silent.
                return None
            if message is not None:
                return message
            try:
                data = self.sock.recv(65_536)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
                continue
            except OSError:
                return None
            if not data:
                return None
            self.frames.feed(data)

    def _outcome(self, begin: float) -> RunOutcome:
        end = self.end
        if isinstance(end, Failed):
            if end.step == "deadline":
                raise EnvelopeFailure(FailureKind.DEADLINE_BEFORE_START, end.step, end.error)
            kind = FailureKind.INIT_LOST if end.step == INIT_LOST else FailureKind.SETUP_FAILED
            raise EnvelopeFailure(
                kind,
                end.step,
                end.error,
                cleaned_up=end.cleanup_complete,
                cleanup_problems=tuple(end.cleanup_problems),
            )
        if end is None:
            raise EnvelopeFailure(FailureKind.REPORTS_STOPPED, "reports", cleaned_up=False)
        if not end.cleanup_complete:
            raise EnvelopeFailure(
                FailureKind.CLEANUP_UNPROVED,
                "cleanup",
                cleaned_up=False,
                cleanup_problems=tuple(end.cleanup_problems),
            )
        started = self.started
        report = ResourceReport(
            wall_ms=(time.monotonic() - begin) * 1000,
            setup_ms=started.setup_ms if started is not None else 0.0,
            cpu_ms=end.cpu_ms,
            peak_memory_bytes=end.peak_memory_bytes,
            oom_killed=end.oom_killed,
            pids_limit_hit=end.pids_limit_hit,
            deadline_hit=end.stop_reason == "deadline",
        )
        return RunOutcome(
            stdout=self.stdout.result(),
            stderr=self.stderr.result(),
            exit_code=end.exit_code,
            signal=end.signal,
            stop_reason=end.stop_reason,
            report=report,
            scratch_file=end.scratch_file,
        )
