"""`Durability`: what one call keeps outside its process, its envelope slot and journal row.

The service asks it, in order: is the operation known (`known_or`), take a slot (`reserve`),
run under the row (`run`: the row is written at admission, the envelope and the evidence
recorded along the way, the row closed with the result or the failure), `release`. A call
without an operation signature keeps no row; one without a state directory keeps nothing.
A call admission or validation refuses still joins or replays a known operation (`answered_or`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any

import msgspec

from jigcmd import trace
from jigcmd.cancel import CancelSignal
from jigcmd.command.failures import internal_error
from jigcmd.command.sharing import Arrival
from jigcmd.durable.evidencesync import RecordedEvidence
from jigcmd.durable.ownership import Began, Ownership
from jigcmd.envelope.api import Assigned, Ending, EnvelopeIdentity, Hooks, Ticket, Withdrawn
from jigcmd.errors import JigError
from jigcmd.evidence import Evidence
from jigcmd.journal.reservations import Slot
from jigcmd.plan import RunPlan, plan_digest
from jigcmd.protocol.commands import RunResult
from jigcmd.server.backend import PROGRESS_EVERY_S, Owned, Progress

__all__ = ["Durability", "Execute", "SignEnding", "answered_or"]

# Runs the plan with this call's ticket and hooks (the service's own execute).
Execute = Callable[[Ticket, Hooks | None], Awaitable[RunResult]]
# Signs the statement of a run that ended with its output complete; the cleanup is not
# proved yet, so no resource report (see `jigcmd.attest`).
SignEnding = Callable[[Ending], bytes]


class Durability:
    """One call's envelope slot and journal row: replay, reserve, the run's hooks, fail, finish."""

    def __init__(
        self,
        ownership: Ownership | None,
        *,
        operation_id: str,
        signature: str | None,
        root_run: str | None,
        context: str,
        owned: Owned | None = None,
        trace_context: dict[str, str] | None = None,
    ) -> None:
        self._ownership = ownership
        self._owned = owned
        self._trace = trace_context
        self._operation_id = operation_id
        self._signature = signature
        self._context = context
        self.durable = ownership is not None and signature is not None
        if self.durable and not root_run:
            # Operation identity belongs to a run: a durable call without one is a bug.
            raise ValueError("a call with an operation signature needs its caller's run id")
        self._scope = root_run or ""
        self.run_id = uuid.uuid4().hex[:16]
        self.slot: Slot | None = None
        # Whether this call created the row (only such a row is closed with its failure).
        self._began = False
        # The journal's answer when the operation turned out known at admission.
        self._replayed: RunResult | None = None
        # The prepared envelope the row named at admission, when there was one.
        self._recorded_envelope: Assigned | None = None
        # The evidence recorded during the cleanup, when it was (its sync may be in flight).
        self._recorded: RecordedEvidence | None = None

    @property
    def envelope_run_id(self) -> str:
        """The run's id: the prepared envelope's it went to (known at admission), else ours."""
        assigned = self._recorded_envelope
        return self.run_id if assigned is None else assigned.run_id

    async def known_or(self, refusal: JigError, deadline: float, cancel: CancelSignal) -> RunResult:
        """The journal's answer for a known operation; else raise `refusal` (nothing ran)."""
        known = None
        if self.durable:
            assert self._ownership is not None and self._signature is not None
            known = await self._ownership.lookup(
                self._operation_id,
                self._signature,
                root_run=self._scope,
                deadline=deadline,
                cancel=cancel,
                joined=self._owned,
            )
        if known is None:
            raise refusal
        return known

    async def reserve(
        self,
        deadline: float,
        cancel: CancelSignal,
        progress: Progress | None,
        *,
        wait: bool,
        begun: float,
    ) -> None:
        """Take an envelope slot, with `wait` behind earlier callers until the deadline.

        A waiting caller with `progress` hears it at the running call's cadence, its
        `progress` the milliseconds since the call `begun` (a `time.monotonic()` time), the
        scale the run's own progress goes on in. Raises `JigError` when there is none; a call
        without a state directory takes none.
        """
        ownership = self._ownership
        if ownership is None:
            return
        if not wait:
            self.slot = ownership.reserve(self._operation_id)
            return
        queued = None
        if progress is not None:

            async def queued(ahead: int) -> None:
                assert progress is not None
                # No total: the run's ceiling starts only once it has a slot.
                await progress(
                    f"queued: every envelope slot is in use; waiting for one ({ahead} ahead)",
                    max(0, round((time.monotonic() - begun) * 1000)),
                )

        self.slot = await ownership.slots.acquire(
            self._operation_id,
            deadline=deadline,
            cancel=cancel,
            queued=queued,
            every=PROGRESS_EVERY_S,
        )

    async def others_waiting(self) -> bool:
        """Whether a live waiter in another process waits for this operation; never before
        this call began its row (another process joins a row), so no journal read until then."""
        if not self._began or self._ownership is None:
            return False
        return await self._ownership.others_waiting(self._operation_id, root_run=self._scope)

    def release(self) -> None:
        """Give the envelope slot back (the supervisor holds its own lock to the end)."""
        if self.slot is not None and self._ownership is not None:
            self._ownership.release(self.slot)
            self.slot = None

    async def run(
        self,
        plan: RunPlan,
        execute: Execute,
        *,
        evidence: Callable[[Ending], Evidence],
        cancel: CancelSignal,
        sign: SignEnding | None = None,
        digest: Callable[[], str] | None = None,
        deadline_unix_ms: int | None = None,
    ) -> RunResult:
        """Run `execute` under this call's row: opened at admission, closed with its end.

        `deadline_unix_ms` is the row's deadline: the statement's `startedOn` plus the
        ceiling (or the caller's earlier one), the same instant the plan's deadline is.

        `digest` gives `plan_digest(plan)`, the caller's own when it needs it too; it is
        asked for only at admission, after the launch is sent (off the path to the launch).

        With `sign`, the evidence recorded at the run's end carries its signed statement in
        the same commit (the result's own, with the resource report, replaces it at close).
        """
        ownership = self._ownership
        ticket = Ticket(
            run_id=self.run_id,
            operation_id=self._operation_id if self.durable else None,
            root_run=self._scope,
            state_dir=str(ownership.state_dir) if self.durable and ownership else None,
            slot_fd=self.slot.fd if self.slot is not None else None,
        )
        hooks = None
        if self.durable:
            hooks = self._hooks(
                plan,
                digest or partial(plan_digest, plan),
                evidence,
                cancel,
                sign,
                deadline_unix_ms=deadline_unix_ms,
            )
        try:
            result = await execute(ticket, hooks)
        except Withdrawn:
            assert self._replayed is not None
            return self._replayed
        except JigError as error:
            await self._failed(error)
            raise
        except Exception as exc:
            # Open, its row would name a live server as gone: a retry here would wait for
            # it to its deadline, and recovery would later answer otherwise.
            uncertain = internal_error(exc)
            await self._failed(uncertain)
            raise uncertain from exc
        if self.durable and ownership is not None:
            ended = await ownership.finish(
                self._operation_id, result, root_run=self._scope, recorded=self._recorded
            )
            # The row's end, not the answer's: a task's `lastUpdatedAt` the same after a restart.
            result = msgspec.structs.replace(result, ended_unix_ms=ended)
        trace.mark("service: recorded")
        return result

    async def _failed(self, error: JigError) -> None:
        """Close this call's row with `error`, which is then its operation's outcome."""
        # Only a row this call created is closed with its failure: an operation id in
        # flight elsewhere is never touched. A failure before the row was begun (nothing
        # ran) is not recorded, and is not the operation's outcome.
        if self._began and self._ownership is not None:
            ownership = self._ownership
            ended = await ownership.fail(self._operation_id, error, root_run=self._scope)
            error.recorded, error.ended_unix_ms = True, ended

    def _hooks(
        self,
        plan: RunPlan,
        digest: Callable[[], str],
        evidence: Callable[[Ending], Evidence],
        cancel: CancelSignal,
        sign: SignEnding | None,
        *,
        deadline_unix_ms: int | None,
    ) -> Hooks:
        ownership, signature = self._ownership, self._signature
        assert ownership is not None and signature is not None
        operation_id, scope = self._operation_id, self._scope

        async def admit(assigned: Assigned | None) -> bool:
            # One journal transaction before dispatch: a new row, or the known answer.
            # The envelope stages the candidate while this commits. A prepared envelope
            # is known already: the row names it from the start.
            known = await ownership.begin(
                root_run=scope,
                operation_id=operation_id,
                signature=signature,
                context=self._context,
                deadline=plan.deadline,
                run_id=self.run_id if assigned is None else assigned.run_id,
                envelope=assigned,
                plan_digest=digest(),
                cancel=cancel,
                trace_context=self._trace,
                # A join of a row begun elsewhere: the operation runs there (a busy session
                # says "is still running").
                joined=self._owned,
                deadline_unix_ms=deadline_unix_ms,
            )
            self._began = isinstance(known, Began)
            self._replayed = None if isinstance(known, Began) else known
            self._recorded_envelope = assigned
            trace.mark("service: begun")
            if isinstance(known, Began) and self._owned is not None:
                await self._owned(known.created_unix_ms)
            return self._began

        def on_started(envelope: EnvelopeIdentity) -> Coroutine[Any, Any, None] | None:
            # Recorded at begin unless the envelope was made for this launch (or made
            # again under another name): no commit, and no task, while the candidate runs.
            recorded = self._recorded_envelope
            if recorded is not None and recorded.serves(envelope):
                return None
            return ownership.record_envelope(operation_id, envelope, root_run=scope)

        async def on_ended(ending: Ending) -> None:
            # The run's evidence is durable before its cleanup is confirmed; the row
            # stays open until then (see `Ownership.record_evidence`).
            if ending.stop_reason == "exited":
                self._recorded = await ownership.record_evidence(
                    operation_id,
                    evidence(ending),
                    root_run=scope,
                    attestation=None if sign is None else sign(ending),
                )
                trace.mark("service: evidence recorded")

        return Hooks(admit=admit, on_started=on_started, on_ended=on_ended)


async def answered_or(
    refusal: JigError,
    arrival: Arrival,
    ownership: Ownership | None,
    *,
    deadline: float,
    deadline_unix_ms: float,
    cancel: CancelSignal,
    progress: Progress | None,
    joined: Owned | None = None,
) -> RunResult:
    """A refused call's operation if it is known, else raise `refusal` (nothing ran).

    Asked when admission or validation refuses a call: a known operation runs nothing here,
    so neither a drifted Binding nor one no longer naming its command keeps it from its
    answer. Running here, it is joined as one more waiter (`arrival`); running in another
    process of the run, it is joined through the journal until this caller's `deadline`
    (monotonic) or `cancel`; recorded, it is replayed. A row of another request is
    `OPERATION_CONFLICT`, as it is without the refusal.
    """
    if arrival.running():
        # No await from the look to the join: the work cannot end unjoined meanwhile.
        return await arrival.attend(
            deadline=deadline,
            deadline_unix_ms=deadline_unix_ms,
            cancel=cancel,
            progress=progress,
            work=partial(_nothing_to_run, refusal),
        )
    root_run, operation_id = arrival.key
    signature = arrival.signature
    if ownership is None or signature is None or not root_run:
        raise refusal
    found = await ownership.lookup(
        operation_id, signature, root_run=root_run, deadline=deadline, cancel=cancel, joined=joined
    )
    if found is None:
        raise refusal
    return found


async def _nothing_to_run(
    refusal: JigError, cancel: CancelSignal, progress: Progress | None
) -> RunResult:
    """The work of a refused call: none (it only ever joins work already running)."""
    raise refusal
