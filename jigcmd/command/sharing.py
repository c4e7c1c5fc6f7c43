"""An operation belongs to its live waiters, not to the request that happened to start it.

Every call of one operation in this process (the same caller's run, the same operation id,
the same signature) is a waiter on one shared piece of work, whatever front it came by. A
waiter that is cancelled, or whose own deadline passes first, is answered for itself alone
(not `recorded`: that answer is not the operation's outcome) while another waiter lives, and the
work goes on. The work is stopped only when its last live waiter leaves (a cancel, a
deadline earlier than the work's own, or the waiter's task itself being cancelled: the
coordinator is lost); that waiter is answered with how the work then ended, which is what
the journal records. A waiter whose deadline is not earlier than the work's simply waits:
the work ends by its own deadline.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.abc

from jigcmd.cancel import CancelSignal
from jigcmd.errors import Code, JigError
from jigcmd.protocol.commands import RunResult
from jigcmd.server.backend import Progress

__all__ = ["OperationKey", "SharedOperations", "Work"]

logger = logging.getLogger(__name__)

# (the caller's run, the operation id): the scope of operation identity.
OperationKey = tuple[str, str]
# The shared work, given the event that stops it and the progress of its live waiters.
Work = Callable[[CancelSignal, Progress | None], Awaitable[RunResult]]


class SharedOperations:
    """The operations of this process in flight, each with its live waiters.

    Sharing needs a task group the work can outlive its first waiter in: `open()`. Outside
    it each call runs on its own (its cancel stops its work), as before.
    """

    def __init__(self) -> None:
        self._live: dict[OperationKey, _Shared] = {}
        self._tasks: anyio.abc.TaskGroup | None = None

    @asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        """Share operations among their waiters until the block ends (it waits for the work)."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                yield
            finally:
                self._tasks = None

    def running(self, key: OperationKey) -> bool:
        """Whether the operation is in flight here now."""
        return key in self._live

    async def attend(
        self,
        key: OperationKey,
        signature: str,
        *,
        deadline: float,
        cancel: CancelSignal,
        progress: Progress | None,
        work: Work,
    ) -> RunResult:
        """Wait for the operation as one of its waiters, starting its work if none runs.

        `deadline` (monotonic) and `cancel` are this waiter's; the first waiter's deadline
        is the work's own. A different request under the key is `OPERATION_CONFLICT`.
        """
        shared = self._live.get(key)
        if shared is None:
            if self._tasks is None:
                return await work(cancel, progress)
            shared = _Shared(key[1], signature, deadline)
            self._live[key] = shared
            self._tasks.start_soon(self._drive, key, shared, work)
        elif shared.signature != signature:
            raise JigError(
                Code.OPERATION_CONFLICT,
                f"operationId {key[1]!r} was reused differently (a different request is "
                "running under it)",
            )
        return await shared.attend(deadline, cancel, progress)

    async def _drive(self, key: OperationKey, shared: _Shared, work: Work) -> None:
        try:
            shared.outcome = await work(shared.stop, shared.progress)
        except JigError as error:
            shared.outcome = error
        except Exception:
            logger.exception("command service failed on operation %s", key[1])
            shared.outcome = JigError(
                Code.UNCERTAIN, "internal error in the command service; the outcome is unknown"
            )
        finally:
            if self._live.get(key) is shared:
                del self._live[key]
            shared.finish()


class _Shared:
    """One operation's work and its live waiters."""

    def __init__(self, operation_id: str, signature: str, deadline: float) -> None:
        self.operation_id = operation_id
        self.signature = signature
        self.deadline = deadline
        # A signal: the run's collector is told of it as it is set, without a task.
        self.stop = CancelSignal()
        # The work's end, a signal too: each waiter's wait watches it (`_until_done`).
        self.done = CancelSignal()
        self.outcome: RunResult | JigError | None = None
        # The live waiters, each with its progress callback (None: it asked for none).
        self._waiters: dict[object, Progress | None] = {}

    def finish(self) -> None:
        """The work has ended (its outcome is set): wake every waiter."""
        self.done.set()

    async def progress(
        self, message: str, elapsed_ms: int | None = None, total_ms: int | None = None
    ) -> None:
        """Forward a progress line to every live waiter that asked for them."""
        for forward in list(self._waiters.values()):
            if forward is not None:
                await forward(message, elapsed_ms, total_ms)

    async def attend(
        self, deadline: float, cancel: CancelSignal, progress: Progress | None
    ) -> RunResult:
        token = object()
        self._waiters[token] = progress
        try:
            while not self.done.is_set():
                await self._until_done(cancel, deadline)
                if self.done.is_set():
                    break
                if not cancel.is_set() and deadline >= self.deadline:
                    deadline = math.inf  # the work ends by its own deadline, no later
                    continue
                if len(self._waiters) > 1:
                    raise self._left(cancelled=cancel.is_set())
                # The last live waiter leaves: the work stops; this waiter gets its outcome.
                self.stop.set()
                await self.done.wait()
        finally:
            del self._waiters[token]
            if not self._waiters and not self.done.is_set():
                # The last waiter's task itself was cancelled (the coordinator is gone).
                self.stop.set()
        return self._result()

    async def _until_done(self, cancel: CancelSignal, deadline: float) -> None:
        """Return once the work is done or `cancel` is set, or `deadline` (monotonic) passes.

        No watcher task is spawned per wait: the caller's cancel and the work's end each
        wake it.
        """
        if self.done.is_set() or cancel.is_set():
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        wake = anyio.Event()
        unwatch_done = self.done.watch(wake.set)
        unwatch_cancel = cancel.watch(wake.set)
        try:
            with anyio.move_on_after(remaining):
                await wake.wait()
        finally:
            unwatch_cancel()
            unwatch_done()

    def _left(self, *, cancelled: bool) -> JigError:
        if cancelled:
            return JigError(
                Code.CANCELLED,
                f"request cancelled; operation {self.operation_id!r} continues for its "
                "other callers",
            )
        return JigError(
            Code.DEADLINE_EXCEEDED,
            f"this request's deadline passed; operation {self.operation_id!r} continues for "
            "its other callers (send it again to join it)",
        )

    def _result(self) -> RunResult:
        outcome = self.outcome
        if outcome is None:
            raise JigError(Code.UNCERTAIN, "the command service stopped before the operation ended")
        if isinstance(outcome, JigError):
            raise outcome
        return outcome
