"""An operation belongs to its live waiters, not to the request that happened to start it.

Every call of one operation in this process (the same caller's run, the same operation id,
the same signature) is a waiter on one shared piece of work, whatever front it came by. A
waiter that is cancelled, or whose own deadline passes first, is answered for itself alone
(not `recorded`: that answer is not the operation's outcome) while another waiter lives, and the
work goes on. The work is stopped only when its last live waiter leaves (a cancel, a
deadline earlier than the work's own, or the waiter's task itself being cancelled: the
coordinator is lost); that waiter is answered with how the work then ended, which is what
the journal records: a cancel's stop is `CANCELLED`, a deadline's `DEADLINE_EXCEEDED`
(the work stopped as at its own deadline, `CancelSignal.cause`). A waiter whose deadline is
not earlier than the work's simply waits: the work ends by its own deadline.

A call is a live waiter from the moment it reaches the service (`arriving`), before its
checks, which may wait (the first call's admission hashes the runtime in a thread): a cancel
of another waiter applied meanwhile finds it there and leaves the work to it.

Waiters in other processes count too (another `serve` on the same state directory and run
id, joining through the journal: `OthersWaiting`). They are asked for only when this
process's last waiter leaves, never on a call's own path: while one lives, that waiter is
answered for itself alone and the work goes on, watched every `OTHERS_POLL_S` until none
does (one left, or its process died), and then stopped as cancelled. A process whose
coordinator is lost stops such work at once (`fence`): it cannot outlive its process. Its
waiters here are all cancelled with it, so none is told the work goes on for another: each
is answered with how the work then ended, as the last waiter is.
"""

from __future__ import annotations

import collections
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from typing import Any

import anyio
import anyio.abc

from jigcmd.cancel import CancelSignal
from jigcmd.errors import Code, JigError, operation_conflict
from jigcmd.protocol.commands import RunResult
from jigcmd.server.backend import Progress

__all__ = ["OTHERS_POLL_S", "Arrival", "OperationKey", "OthersWaiting", "SharedOperations", "Work"]

logger = logging.getLogger(__name__)

# (the caller's run, the operation id): the scope of operation identity.
OperationKey = tuple[str, str]
# The shared work, given the event that stops it and the progress of its live waiters.
Work = Callable[[CancelSignal, Progress | None], Awaitable[RunResult]]
# Whether a live waiter in another process still waits for the operation (the journal's).
OthersWaiting = Callable[[], Awaitable[bool]]
# Starts a task beside the work (a watch of other processes' waiters).
Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], None]
# How often work kept for other processes' waiters alone looks whether one still waits.
OTHERS_POLL_S = 0.25


class SharedOperations:
    """The operations of this process in flight, each with its live waiters.

    Sharing needs a task group the work can outlive its first waiter in: `open()`. Outside
    it each call runs on its own (its cancel stops its work), as before.
    """

    def __init__(self) -> None:
        self._live: dict[OperationKey, _Shared] = {}
        # Calls that reached the service and have not attended yet, by key and signature.
        self._arriving: collections.Counter[tuple[OperationKey, str]] = collections.Counter()
        self._tasks: anyio.abc.TaskGroup | None = None
        # Set once this process's coordinator is lost: no work is kept for other processes.
        self._fenced = False

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

    def fence(self) -> None:
        """This process's coordinator is lost: from now on the work in flight is kept for
        nobody in other processes, and work kept only for them stops now."""
        self._fenced = True
        for shared in self._live.values():
            shared.fence()

    @contextmanager
    def arriving(self, key: OperationKey, signature: str | None) -> Iterator[Arrival]:
        """A call that reached the service: a live waiter of its operation until the block ends.

        Enter it before the call's first await; attend through the `Arrival`. Leaving the
        block without attending (the call was refused, or its task cancelled) stops the work
        if no other waiter is left for it. Without a signature there is nothing to share.
        """
        depart = None
        if signature is not None:
            self._arriving[(key, signature)] += 1
            depart = partial(self._departed, key, signature)
        arrival = Arrival(self, key, signature, depart)
        try:
            yield arrival
        finally:
            if arrival.withdraw():
                shared = self._live.get(key)
                if shared is not None and shared.signature == signature:
                    shared.stop_if_abandoned()

    def _spawn(self, watch: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `watch` beside the work (not once sharing has ended: nothing is watched then)."""
        if self._tasks is not None:
            self._tasks.start_soon(watch)

    def _arrived(self, key: OperationKey, signature: str) -> int:
        """How many calls of this operation reached the service and have not attended yet."""
        return self._arriving[(key, signature)]

    def _departed(self, key: OperationKey, signature: str) -> None:
        self._arriving[(key, signature)] -= 1
        if not self._arriving[(key, signature)]:
            del self._arriving[(key, signature)]

    async def attend(
        self,
        key: OperationKey,
        signature: str,
        *,
        deadline: float,
        deadline_unix_ms: float,
        cancel: CancelSignal,
        progress: Progress | None,
        work: Work,
        others: OthersWaiting | None = None,
    ) -> RunResult:
        """Wait for the operation as one of its waiters, starting its work if none runs.

        `deadline` (monotonic, to wait until) and `cancel` are this waiter's; the first
        waiter's deadline is the work's own. Waiters' deadlines are compared as
        `deadline_unix_ms`, in the callers' clock: the same deadline is the same there. A
        different request under the key is `OPERATION_CONFLICT`. `others`: who else waits
        for it in other processes (the first waiter's is the work's).
        """
        shared = self._live.get(key)
        if shared is None:
            if self._tasks is None:
                return await work(cancel, progress)
            arrived = partial(self._arrived, key, signature)
            shared = _Shared(key[1], signature, deadline_unix_ms, arrived)
            if self._fenced:
                shared.fence()
            elif others is not None:
                shared.count_others(others, self._spawn)
            self._live[key] = shared
            self._tasks.start_soon(self._drive, key, shared, work)
        elif shared.signature != signature:
            raise operation_conflict(key[1], running=True)
        return await shared.attend(deadline, deadline_unix_ms, cancel, progress)

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


class Arrival:
    """One call of an operation, between reaching the service and attending it."""

    def __init__(
        self,
        operations: SharedOperations,
        key: OperationKey,
        signature: str | None,
        depart: Callable[[], None] | None,
    ) -> None:
        self._operations = operations
        self._key = key
        self._signature = signature
        # Uncounts it from its operation's arriving calls, while it is counted there.
        self._depart = depart

    async def attend(
        self,
        *,
        deadline: float,
        deadline_unix_ms: float,
        cancel: CancelSignal,
        progress: Progress | None,
        work: Work,
        others: OthersWaiting | None = None,
    ) -> RunResult:
        """Wait for the operation as one of its waiters (`SharedOperations.attend`)."""
        if self._signature is None:
            # No operation identity: nobody can join it, so its one caller owns it.
            return await work(cancel, progress)
        # From arriving to attending with no await between: it is a waiter all along.
        self.withdraw()
        return await self._operations.attend(
            self._key,
            self._signature,
            deadline=deadline,
            deadline_unix_ms=deadline_unix_ms,
            cancel=cancel,
            progress=progress,
            work=work,
            others=others,
        )

    @property
    def key(self) -> OperationKey:
        """Its operation: (the caller's run, the operation id)."""
        return self._key

    @property
    def signature(self) -> str | None:
        """Its request's signature (None: it has no operation identity)."""
        return self._signature

    def running(self) -> bool:
        """Whether its operation is in flight here now, which it may join."""
        return self._signature is not None and self._operations.running(self._key)

    def withdraw(self) -> bool:
        """No longer count this call as arriving; whether it still was."""
        depart, self._depart = self._depart, None
        if depart is None:
            return False
        depart()
        return True


class _Shared:
    """One operation's work and its live waiters."""

    def __init__(
        self,
        operation_id: str,
        signature: str,
        deadline_unix_ms: float,
        arriving: Callable[[], int],
    ) -> None:
        self.operation_id = operation_id
        self.signature = signature
        # The work's deadline in the callers' clock (Unix ms), where waiters' are compared.
        self.deadline_unix_ms = deadline_unix_ms
        # How many calls of it reached the service and will attend: live waiters too.
        self._arriving = arriving
        # A signal: the run's collector is told of it as it is set, without a task.
        self.stop = CancelSignal()
        # The work's end, a signal too: each waiter's wait watches it (`_until_done`).
        self.done = CancelSignal()
        self.outcome: RunResult | JigError | None = None
        # The live waiters, each with its progress callback (None: it asked for none).
        self._waiters: dict[object, Progress | None] = {}
        # Who waits for it in other processes, and how to start watching them (`count_others`).
        self._others: OthersWaiting | None = None
        self._spawn: Spawn | None = None
        # Whether a watch of other processes' waiters is on (`_watch_others`).
        self._watching = False
        # Set once this process's coordinator is lost: every waiter here is being cancelled.
        self._fenced = False

    def count_others(self, others: OthersWaiting, spawn: Spawn) -> None:
        """Count the waiters of other processes too, watched in tasks `spawn` starts."""
        self._others, self._spawn = others, spawn

    def fence(self) -> None:
        """Count no other process's waiter from now on; stop the work if no waiter is here.

        Each waiter here then leaves by its cancel and gets the work's outcome, not words
        saying the work goes on: it cannot outlive this process (`attend`).
        """
        self._others = None
        self._fenced = True
        self.stop_if_abandoned()

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
        self,
        deadline: float,
        deadline_unix_ms: float,
        cancel: CancelSignal,
        progress: Progress | None,
    ) -> RunResult:
        token = object()
        self._waiters[token] = progress
        try:
            while not self.done.is_set():
                await self._until_done(cancel, deadline)
                if self.done.is_set():
                    break
                if self._fenced:
                    # The coordinator is lost: every waiter here is cancelled with it, and
                    # none is left for whom the work would go on. Each gets how it ended.
                    self.stop.set()
                    await self.done.wait()
                    break
                if not cancel.is_set() and deadline_unix_ms >= self.deadline_unix_ms:
                    deadline = math.inf  # the work ends by its own deadline, no later
                    continue
                if self._others_here():
                    raise self._left(cancelled=cancel.is_set())
                # The last waiter here: the work goes on while one waits in another process.
                kept = await self._kept_for_others()
                if self.done.is_set():
                    break
                if (kept or self._others_here()) and not self._fenced:
                    raise self._left(cancelled=cancel.is_set())
                # The last live waiter leaves (or the process was fenced meanwhile): the work
                # stops; this waiter gets its outcome.
                # By its deadline, the work is stopped as at a deadline (DEADLINE_EXCEEDED,
                # `stopReason` `deadline`): nobody cancelled it.
                self.stop.set("cancelled" if cancel.is_set() else "deadline")
                await self.done.wait()
        finally:
            del self._waiters[token]
            # The last waiter's task itself was cancelled (the coordinator is gone).
            self.stop_if_abandoned()
        return self._result()

    def stop_if_abandoned(self) -> None:
        """Stop the work when no waiter is left for it, attending or arriving; one in another
        process is left to the watch of them (`_watch_others`)."""
        if self._watching and self._others is not None:
            return
        if not self._waiters and not self._arriving() and not self.done.is_set():
            self.stop.set()

    def _others_here(self) -> bool:
        """Whether a waiter of this process besides the one leaving lives (or arrives)."""
        return len(self._waiters) > 1 or bool(self._arriving())

    async def _kept_for_others(self) -> bool:
        """Whether a live waiter in another process waits for it; then watch them (once)."""
        others = self._others
        if others is None or not await others():
            return False
        if not self._watching and self._spawn is not None:
            self._watching = True
            self._spawn(self._watch_others)
        return True

    async def _watch_others(self) -> None:
        """While no waiter is here, look every `OTHERS_POLL_S` whether one still waits in
        another process; once none does (or this process is fenced), stop the work."""
        try:
            while not self.done.is_set():
                with anyio.move_on_after(OTHERS_POLL_S):
                    await self.done.wait()
                if self.done.is_set() or self._waiters or self._arriving():
                    continue  # the waiters here decide as they leave
                others = self._others
                if others is not None and await others():
                    continue
                self._watching = False
                self.stop_if_abandoned()
                return
        finally:
            self._watching = False

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
