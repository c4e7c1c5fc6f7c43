"""The server's side of one run: the candidate's output, the supervisor's reports, the outcome.

`RunCollector` reads both output pipes (capped, draining the rest: `outputs`), listens to
the supervisor's reports, forwards a cancel and turns the end into a `RunOutcome`, only
after the supervisor confirmed the tree is gone and every owned resource released. The
socket and the pipes are read by the event loop's callbacks, which wake the one collecting
coroutine (`waker`), and the caller's `CancelSignal` calls back as it is set: a run spawns
no task.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time

import anyio
import msgspec

from jigcmd import trace
from jigcmd.cancel import CancelSignal
from jigcmd.envelope.api import (
    Ending,
    EnvelopeFailure,
    EnvelopeIdentity,
    FailureKind,
    Hooks,
    OnEnded,
    RunOutcome,
)
from jigcmd.envelope.failure import CHANGED_STEPS
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
from jigcmd.envelope.outputs import Capture, Outputs
from jigcmd.envelope.waker import Waker
from jigcmd.envelope.wire import MSGSPEC
from jigcmd.evidence import ResourceReport
from jigcmd.plan import RunPlan

__all__ = ["RunCollector"]

# After the supervisor reports the end, every writer of the pipes is dead; this only bounds
# the wait for bytes already in flight.
_DRAIN_AFTER_END = 1.0
# How long past the plan's deadline the supervisor may take to fence and release.
_FINISH_GRACE = 10.0
# How long a withdrawn launch's supervisor may take to report its envelope released.
_WITHDRAW_WAIT = 1.0


class _Reports:
    """The supervisor's reports, read off the run socket by the loop's reader callback."""

    def __init__(self, waker: Waker, sock: socket.socket) -> None:
        self._waker = waker
        self._sock = sock
        self._frames = FrameReader(MSGSPEC)
        self._next: Message | None = None
        self._eof = False
        # A frame that cannot be trusted: nothing after it is read, as if the reports stopped.
        self._garbled = False
        self._reading = False

    def start(self) -> None:
        """Read the socket as reports arrive (until `stop`, or its EOF)."""
        if not self._reading and not self._eof:
            self._reading = True
            self._waker.loop.add_reader(self._sock.fileno(), self._waker.guarded(self._readable))

    def stop(self) -> None:
        """No more reading (before the socket is closed)."""
        if self._reading:
            self._reading = False
            self._waker.loop.remove_reader(self._sock.fileno())

    def ready(self) -> bool:
        """Whether a report waits to be taken, or none will come any more."""
        if self._next is None and not self._garbled:
            try:
                self._next = self._frames.next()
            except (ValueError, msgspec.DecodeError):
                # Oversized or garbled: nothing after it can be trusted, as if it went silent.
                self._garbled = True
        return self._next is not None or self._garbled or self._eof

    def take(self) -> Message | None:
        """The next report (`ready` first); None once the reports stopped.

        Reports that arrived before the socket's EOF are taken first, whenever it came.
        """
        self.ready()
        message, self._next = self._next, None
        return message

    def _readable(self) -> None:
        try:
            data = self._sock.recv(65_536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._frames.feed(data)
        else:
            self._eof = True
            self.stop()
        self._waker.wake()


class RunCollector:
    def __init__(
        self,
        plan: RunPlan,
        *,
        sock: socket.socket,
        stdout_r: int,
        stderr_r: int,
        cancel: CancelSignal,
        hooks: Hooks,
    ) -> None:
        self.plan = plan
        self.sock = sock
        sock.setblocking(False)
        self._waker = Waker(asyncio.get_running_loop())
        self.stdout = Capture(stdout_r, hooks.on_output, "stdout")
        self.stderr = Capture(stderr_r, hooks.on_output, "stderr")
        self.outputs = Outputs(self._waker, (self.stdout, self.stderr))
        self.reports = _Reports(self._waker, sock)
        self.cancel = cancel
        self.hooks = hooks
        self.started: Started | None = None
        self.end: Finished | Failed | None = None

    async def collect(self) -> RunOutcome:
        # The cancel calls back as it is set: no task waits for it.
        unwatch = self.cancel.watch(self._forward_cancel)
        try:
            self.outputs.start()
            self.reports.start()
            await self._listen()
        finally:
            unwatch()
            self._close()
        trace.mark("executor: output drained")
        return self._outcome()

    def _forward_cancel(self) -> None:
        """Tell the supervisor to stop the run (a supervisor already gone needs no telling)."""
        with contextlib.suppress(OSError):
            send_message(self.sock, Cancel(self.cancel.cause), codec=MSGSPEC)

    async def abandon(self) -> None:
        """Wait (bounded) for the end report of a withdrawn launch; drop output and errors."""
        try:
            with anyio.CancelScope(shield=True):
                self.reports.start()
                limit = time.monotonic() + _WITHDRAW_WAIT
                while self.end is None:
                    message = await self._next_message(limit)
                    if message is None:
                        break
                    if isinstance(message, Finished | Failed):
                        self.end = message
        finally:
            self._close()

    def _close(self) -> None:
        self.reports.stop()
        self.sock.close()
        self.outputs.close()

    async def _next_message(self, limit: float) -> Message | None:
        """The supervisor's next report; None once they stop, or at `limit` (monotonic)."""
        if not await self._waker.until(self.reports.ready, limit - time.monotonic()):
            return None
        return self.reports.take()

    async def _listen(self) -> None:
        limit = self.plan.deadline + _FINISH_GRACE
        while self.end is None:
            message = await self._next_message(limit)
            if message is None:
                return
            if isinstance(message, Started):
                trace.mark("executor: started")
                await self._started(message)
            elif isinstance(message, Ended):
                trace.mark("executor: ended")
                self.outputs.end()
                if self.hooks.on_ended is not None:
                    await self._ended(message, self.hooks.on_ended)
            elif isinstance(message, Finished | Failed):
                trace.mark("executor: end reported")
                self.outputs.end()
                self.end = message
        if isinstance(self.end, Finished):
            # Every writer is dead; read what is still in the pipes, bounded in time.
            await self._waker.until(self.outputs.done, _DRAIN_AFTER_END)

    async def _started(self, message: Started) -> None:
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
                # The journal recording the envelope: meanwhile the loop's callbacks read
                # the output and the reports, and a cancel is forwarded.
                await work

    async def _ended(self, ended: Ended, on_ended: OnEnded) -> None:
        # Every writer of the pipes is dead or SIGKILLed once the candidate ended (pid 1
        # killed the namespace first): the output completes now, during the cleanup.
        if not await self._waker.until(self.outputs.done, _DRAIN_AFTER_END):
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

    def _outcome(self) -> RunOutcome:
        end = self.end
        if isinstance(end, Failed):
            kind = FailureKind.SETUP_FAILED
            if end.step == "deadline":
                kind = FailureKind.DEADLINE_BEFORE_START
            elif end.step == INIT_LOST:
                kind = FailureKind.INIT_LOST
            elif end.step in CHANGED_STEPS:
                kind = FailureKind.PATH_CHANGED
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
            # Both the supervisor's, on one clock: setup up to the candidate's start as pid 1
            # took it, wall from there to its end (this collection's own span holds both).
            wall_ms=end.wall_ms,
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
