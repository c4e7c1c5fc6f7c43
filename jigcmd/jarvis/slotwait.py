"""A `run.create`'s wait for an envelope slot: first come, first served, bounded, audited.

A call that has to wait is audited as it begins to (`waiting: …`, its `allow` kept), so that
a jarvis killed meanwhile leaves its decision in the journal; the wait's end is a row of its
own. The wait ends without a slot, nothing run, when its bound passes (429), when the queue is
full (429), when jarvis stops (503), or when the caller goes away (its connection closed:
it would never read the answer, and a run nobody waits for should not start later).
"""

from __future__ import annotations

from typing import Final

from jigcmd.cancel import CancelSignal
from jigcmd.durable.slotqueue import SlotQueue
from jigcmd.errors import Code, JigError
from jigcmd.jarvis.auditing import AuditTrail
from jigcmd.jarvis.fields import executes
from jigcmd.jarvis.policy import Decision, Request
from jigcmd.jarvis.tools import ToolError
from jigcmd.journal.reservations import Reservations, Slot

__all__ = ["RETRY_AFTER", "SlotWaits"]

# A full house (every run or envelope slot busy) is answered 429 with this: runs are short,
# so a client may try again after a second.
RETRY_AFTER: Final = {"Retry-After": "1"}
# nginx's "client closed request": the answer of a call whose caller left, which no one reads.
_CALLER_GONE: Final = 499
_LEFT = "the caller left while it waited for an envelope slot; nothing ran"


class SlotWaits:
    """The calls of one jarvis waiting for an envelope slot, and the slots they give back."""

    def __init__(
        self,
        reservations: Reservations | None,
        trail: AuditTrail,
        stop: CancelSignal,
        queue_wait: float,
        early: float,
    ) -> None:
        # The envelope slots shared with every jigcmd using the same state directory.
        self._reservations = reservations
        self._queue = SlotQueue(
            self._take, reservations.exhausted_message if reservations is not None else str
        )
        self._trail = trail
        self._stop = stop
        self._queue_wait = queue_wait
        self._early = early

    @property
    def waiting(self) -> int:
        """How many `run.create` calls wait for an envelope slot now."""
        return self._queue.waiting

    async def take(
        self,
        actor: str,
        tool: str,
        request: Request,
        decision: Decision,
        *,
        arrived: float,
        gone: CancelSignal | None = None,
    ) -> Slot | None:
        """A slot, waited for in arrival order within the call's bound; else a `ToolError`.

        The bound is the least of the server's queue wait, the call's own `timeout_ms` (as its
        rule caps it; a call without one is not bound by the policy's ceiling) and the early
        answer (UTCP's HTTP client gives up after 30 s). `gone` is set when the caller left.
        """
        if self._reservations is None:
            return None
        bound = min(self._queue_wait, self._early)
        if request.timeout_ms is not None:
            assert decision.timeout_ms is not None
            bound = min(bound, decision.timeout_ms / 1000)
        either = CancelSignal()
        unwatch = [signal.watch(either.set) for signal in (self._stop, gone) if signal]

        async def queued(ahead: int) -> None:
            # The decision is audited as the wait begins, not only as it ends: a jarvis killed
            # meanwhile leaves this row (the wait's outcome follows in a row of its own).
            outcome = f"waiting: for an envelope slot, {ahead} call(s) ahead{executes(decision)}"
            await self._trail.decision(actor, tool, request, decision, outcome)

        try:
            slot = await self._queue.acquire(
                "jarvis", deadline=arrived + bound, cancel=either, queued=queued
            )
        except JigError as exc:
            refusal = self._refusal(exc, bound)
            await self._trail.decision(actor, tool, request, decision, refusal[0])
            raise refusal[1] from None
        finally:
            for end in unwatch:
                end()
        if gone is not None and gone.is_set():
            # Left as the slot came: its run would start with no one to answer.
            self.release(slot)
            await self._trail.decision(actor, tool, request, decision, f"cancelled: {_LEFT}")
            raise ToolError(_CALLER_GONE, _LEFT)
        return slot

    def _refusal(self, exc: JigError, bound: float) -> tuple[str, ToolError]:
        """The audit row's outcome and the caller's error for a wait that ended without a slot."""
        if exc.code is Code.CANCELLED and self._stop.is_set():
            refusal = "jarvis is shutting down; nothing ran"
            return f"refused: {refusal}", ToolError(503, refusal)
        if exc.code is Code.CANCELLED:
            return f"cancelled: {_LEFT}", ToolError(_CALLER_GONE, _LEFT)
        if exc.code is Code.EXECUTION_FAILED:
            return f"refused: {exc.message}", ToolError(503, exc.message)
        assert self._reservations is not None
        full = (
            f"every envelope slot stayed in use for the {bound:g} s this call may wait "
            f"({self._reservations.exhausted_message()}); nothing ran"
            if exc.code is Code.DEADLINE_EXCEEDED
            else exc.message
        )
        return f"refused: {full}", ToolError(429, full, headers=RETRY_AFTER)

    def _take(self, tag: str) -> Slot | None:
        assert self._reservations is not None
        try:
            return self._reservations.acquire(tag)
        except OSError as exc:
            raise JigError(
                Code.EXECUTION_FAILED,
                f"cannot take an envelope slot in {self._reservations.directory}: "
                f"{exc.strerror or exc}; nothing ran",
            ) from exc

    def release(self, slot: Slot) -> None:
        """Give a slot back; the first call waiting for one looks at once."""
        slot.release()
        self._queue.released()
