"""The one command path every front shares: admit → validate → plan → execute → evidence."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from functools import partial
from pathlib import Path
from typing import Final

import msgspec

from jigcmd import trace
from jigcmd.attest.attester import Attester
from jigcmd.cancel import CancelSignal
from jigcmd.clock import unix_ms
from jigcmd.command.callnotes import call_notes
from jigcmd.command.catalog import AdmissionCheck, Catalog
from jigcmd.command.dispatch import Call, call_plan, dispatch, template_plan
from jigcmd.command.durability import Durability, answered_or
from jigcmd.command.failures import before_dispatch
from jigcmd.command.keeping import keep_result, keep_stopped
from jigcmd.command.placement import Placement
from jigcmd.command.runtime import BunBinary
from jigcmd.command.sharing import SharedOperations
from jigcmd.durable.ownership import Ownership
from jigcmd.durable.replay import with_tests
from jigcmd.durable.runresources import RunResources
from jigcmd.envelope.api import Executor, Refills
from jigcmd.errors import Code, JigError
from jigcmd.journal.reservations import Slot
from jigcmd.plan import Limits, RunPlan
from jigcmd.policy.binding import CommandPolicy
from jigcmd.policy.lock import Admission
from jigcmd.policy.planner import effective_deadline, unix_deadline_ms
from jigcmd.policy.request import ValidRequest
from jigcmd.protocol.commands import Recorded, RunResult, ToolInfo
from jigcmd.server.backend import Owned, Progress

__all__ = ["DEFAULT_QUEUE_WAIT_S", "CommandService"]

# How long a call that finds every envelope slot in use may wait for one (`--queue-wait`),
# unless the caller's own deadline comes first; the run's ceiling starts after the wait.
DEFAULT_QUEUE_WAIT_S: Final = 60.0


class CommandService:
    """Runs admitted Binding commands in fresh envelopes; implements `CommandBackend`."""

    def __init__(
        self,
        commands: Mapping[str, CommandPolicy],
        *,
        admission: Admission,
        runtime: BunBinary,
        executor: Executor,
        root_deadline_unix_ms: int | None = None,
        limits: Limits | None = None,
        runtime_check: AdmissionCheck | None = None,
        ownership: Ownership | None = None,
        queue_wait: float = DEFAULT_QUEUE_WAIT_S,
    ) -> None:
        self.catalog = Catalog(commands, admission, runtime_check)
        self._runtime = runtime
        self._executor = executor
        # Told when a call's answer is out, when it keeps envelopes prepared.
        self._refills = executor if isinstance(executor, Refills) else None
        self._root_deadline = root_deadline_unix_ms
        self._limits = limits or Limits()
        # The journal and envelope slots; None only for tools that hold no state directory.
        self._ownership = ownership
        # The CPU pins of the envelopes alive on this host now, and the CPUs the cgroup
        # base's cpuset allows (`jigcmd.command.placement`).
        self._placement = Placement()
        # Signs each completed run's statement; None only for tools that hold no key.
        self._attester: Attester | None = None
        # The operations in flight here and their live waiters (shared once `sharing()`).
        self._operations = SharedOperations()
        self._queue_wait = queue_wait
        # Where detailed calls keep their per-run resources (streams, JUnit report).
        self.resources: RunResources | None = None

    def tool_changes(self) -> AsyncIterator[list[ToolInfo]]:
        """The catalog each time it changes (`Catalog.readmit`)."""
        return self.catalog.changes()

    def read_resource(self, scope: str, uri: str) -> tuple[bytes, str]:
        """A per-run resource kept in the state directory, for a caller of `scope`."""
        if self.resources is None:
            raise LookupError("this server keeps no run resources (no state directory)")
        data, kind = self.resources.read(scope, uri)
        return data, kind.mime_type

    @property
    def state_dir(self) -> Path | None:
        """The state directory of the journal and slots, once attached."""
        return self._ownership.state_dir if self._ownership is not None else None

    def tools(self) -> list[ToolInfo]:
        """Every configured command, with the reason it is unavailable when not admitted."""
        return self.catalog.tools()

    @property
    def executor(self) -> Executor:
        """The executor runs go to."""
        return self._executor

    def sharing(self) -> AbstractAsyncContextManager[None]:
        """While open, an operation outlives the waiter that started it (`command.sharing`)."""
        return self._operations.open()

    def attach_ownership(self, ownership: Ownership) -> None:
        """Use this journal and these envelope slots (and keep resources beside them)."""
        self._ownership = ownership
        self.resources = RunResources(ownership.state_dir)

    def set_queue_wait(self, seconds: float) -> None:
        """Bound a queued call's wait for a slot by `seconds` (and the caller's deadline)."""
        self._queue_wait = seconds

    @property
    def attester(self) -> Attester | None:
        """What signs the statements of this service's runs, if anything does."""
        return self._attester

    def attach_attester(self, attester: Attester | None) -> None:
        """Sign every completed run's statement with `attester` from now on (None: stop)."""
        self._attester = attester

    def attach_placement(self, placement: Placement) -> None:
        """Place runs with what `placement` reads (the cgroup backend's pins and cpuset)."""
        self._placement = placement

    def _place(self, slot: Slot | None) -> tuple[int, ...]:
        """The CPUs for this run (`jigcmd.command.placement`)."""
        return self._placement.place(self._limits, slot.index if slot is not None else None)

    def template_plan(self) -> RunPlan:
        """A plan shaped like every plan this service makes, for preparing envelopes early."""
        return template_plan(self._runtime, self._limits)

    async def run(
        self,
        input: object,
        *,
        operation_id: str,
        deadline_unix_ms: int | None,
        cancel: CancelSignal,
        progress: Progress | None = None,
        signature: str | None = None,
        context: str = "",
        root_run: str | None = None,
        wait_for_slot: bool = False,
        owned: Owned | None = None,
        trace_context: dict[str, str] | None = None,
        detailed: bool = False,
        keep_resources: bool | None = None,
    ) -> RunResult:
        """Check admission, validate, plan and execute one call; see `CommandBackend.run`.

        `detailed`: a test command's per-test results in the answer (MCP, `jigcmd run --json`),
        and unless `keep_resources` says otherwise the run's resources kept for
        `resources/read` (MCP); Run/1 asks for neither. Every test command's run has Bun write
        its JUnit report all the same: its signed test result is read from it (`_plan`).
        """
        trace.mark("service: run")
        begun = time.monotonic()
        # An operation belongs to its live waiters (`jigcmd.command.sharing`), and this call
        # is one from here, before the checks may wait: a cancel of another waiter applied
        # meanwhile leaves the operation to it.
        key = (root_run or "", operation_id)
        keep = detailed if keep_resources is None else keep_resources
        scope = root_run or context
        notes: tuple[str, ...] = ()
        try:
            with self._operations.arriving(key, signature) as arrival:
                named = input.get("command") if isinstance(input, dict) else None
                try:
                    await self.catalog.check_admission(named)
                    # After admission: its one-off deferred check (hashing the 80 MB Bun
                    # binary) is the server's warm-up, not this run's; the caller's own
                    # deadlines are absolute times and bound the call all the same.
                    deadline, started = self._deadline(deadline_unix_ms)
                    # The same deadline in the callers' own clock: what waiters compare.
                    when = unix_deadline_ms(started, deadline_unix_ms, self._root_deadline)
                    valid = self.catalog.validate(input)
                    notes = call_notes(valid) if detailed else ()
                except JigError as refusal:
                    # The Binding is checked only for what would run: a known operation is
                    # joined or replayed all the same, and nothing runs either way.
                    deadline, started = self._deadline(deadline_unix_ms)
                    result = await answered_or(
                        refusal,
                        arrival,
                        self._ownership,
                        deadline=deadline,
                        deadline_unix_ms=unix_deadline_ms(
                            started, deadline_unix_ms, self._root_deadline
                        ),
                        cancel=cancel,
                        progress=progress,
                        joined=owned,
                    )
                    return await self._answer(result, detailed, keep, scope, operation_id)
                call = Call(
                    # The statement names the lock that admitted this call, not one read while
                    # it waited for a slot (`readmit` replaces the attester with the new lock's).
                    attester=self._attester,
                    operation_id=operation_id,
                    deadline_unix_ms=deadline_unix_ms,
                    signature=signature,
                    context=context,
                    root_run=root_run,
                    wait_for_slot=wait_for_slot,
                    owned=owned,
                    trace_context=trace_context,
                    begun=begun,
                    started_unix_ms=started,
                    notes=notes,
                )
                durability = self._durability(call)
                result = await arrival.attend(
                    deadline=deadline,
                    deadline_unix_ms=when,
                    cancel=cancel,
                    progress=progress,
                    work=partial(
                        self._operate, valid, call, durability=durability, deadline=deadline
                    ),
                    # Asked only once its row is begun here: nobody can have joined it before.
                    others=durability.others_waiting if durability.durable else None,
                )
        except JigError as error:
            error.notes = notes
            if keep:
                # A run stopped by its deadline or a cancel captured output and was
                # signed all the same: its answer links them as a result's does.
                await keep_stopped(self.resources, error, scope, operation_id)
            raise
        result = msgspec.structs.replace(result, notes=notes)
        return await self._answer(result, detailed, keep, scope, operation_id)

    def fence(self) -> None:
        """The front's coordinator is lost: stop the work kept only for other processes'
        waiters, and keep none for them from now on (`SharedOperations.fence`)."""
        self._operations.fence()

    async def _answer(
        self, result: RunResult, detailed: bool, keep: bool, scope: str, operation_id: str
    ) -> RunResult:
        """A run's or a replay's answer: its tests when `detailed`, its resources when `keep`."""
        if detailed:
            # A replay of a row that kept no report says so, as a fresh run's answer would.
            result = with_tests(result)
        if keep:
            result = await keep_result(self.resources, result, scope, operation_id)
        return result

    def _durability(self, call: Call) -> Durability:
        """What the call keeps outside this process (its slot and row), if it runs the work."""
        return Durability(
            self._ownership,
            operation_id=call.operation_id,
            signature=call.signature,
            root_run=call.root_run,
            context=call.context,
            owned=call.owned,
            trace_context=call.trace_context,
        )

    async def _operate(
        self,
        valid: ValidRequest,
        call: Call,
        cancel: CancelSignal,
        progress: Progress | None,
        *,
        durability: Durability,
        deadline: float,
    ) -> RunResult:
        """The operation's work, stopped by `cancel`: known? → slot → plan → execute → close."""
        refusal = _refused_before_dispatch(deadline, cancel)
        if refusal is not None:
            # Nothing is dispatched and no row is written; a known operation still replays.
            return await durability.known_or(refusal, deadline, cancel)
        trace.mark("service: validated")
        no_slot = await self._reserve(durability, call, deadline, cancel=cancel, progress=progress)
        if no_slot is not None:
            # No slot: a known operation is still answered from the journal.
            return await durability.known_or(no_slot, deadline, cancel)
        try:
            if durability.slot is not None and call.wait_for_slot:
                # The run's own ceiling starts once it has a slot, still bounded by the
                # caller's deadlines.
                deadline, started = self._deadline(call.deadline_unix_ms)
                call = dataclasses.replace(call, started_unix_ms=started)
            return await self._dispatch(
                valid, call, durability, deadline, cancel=cancel, progress=progress
            )
        finally:
            durability.release()

    async def _reserve(
        self,
        durability: Durability,
        call: Call,
        deadline: float,
        *,
        cancel: CancelSignal,
        progress: Progress | None,
    ) -> JigError | None:
        """Take an envelope slot for the call; why not, if none came (`serve --queue-wait`)."""
        # A queued call waits until its caller's deadline or the server's queue limit, not
        # the command's ceiling: the run gets its whole ceiling once it has a slot.
        callers, _ = self._deadline(call.deadline_unix_ms, math.inf)
        queued = call.wait_for_slot
        wait_until = min(callers, time.monotonic() + self._queue_wait) if queued else deadline
        try:
            await durability.reserve(wait_until, cancel, progress, wait=queued, begun=call.begun)
        except JigError as no_slot:
            if queued and no_slot.code == Code.DEADLINE_EXCEEDED and wait_until < callers:
                busy = self._ownership.reservations.exhausted_message() if self._ownership else ""
                return JigError(
                    Code.RESOURCE_EXHAUSTED,
                    f"no envelope slot came free within the {self._queue_wait:g} s a call may "
                    f"wait (serve --queue-wait; {busy}); nothing ran",
                )
            return no_slot
        return None

    async def _dispatch(
        self,
        valid: ValidRequest,
        call: Call,
        durability: Durability,
        deadline: float,
        *,
        cancel: CancelSignal,
        progress: Progress | None,
    ) -> RunResult:
        """Plan the run on its slot, execute it and close its row (`jigcmd.command.dispatch`)."""
        cpus = self._place(durability.slot)
        plan = call_plan(
            valid, call.operation_id, deadline, cpus, runtime=self._runtime, limits=self._limits
        )
        return await dispatch(
            self._executor,
            valid,
            plan,
            call,
            durability,
            root_deadline_unix_ms=self._root_deadline,
            cancel=cancel,
            progress=progress,
        )

    def answered(self) -> None:
        """A call's answer was written; see `CommandBackend.answered`."""
        if self._refills is not None:
            self._refills.answered()

    async def recorded(self, operation_id: str, *, root_run: str) -> Recorded | None:
        """What the journal holds of an operation; see `CommandBackend.recorded`."""
        if self._ownership is None:
            return None
        found = await self._ownership.recorded(operation_id, root_run=root_run)
        if found is not None and isinstance(found.outcome, JigError):
            # A task stopped by its deadline is answered with its links as it first was.
            await keep_stopped(self.resources, found.outcome, root_run, operation_id)
        if found is None or not isinstance(found.outcome, RunResult):
            return found
        # Only MCP tasks are looked up: detailed calls, answered as their first answer was,
        # their tests and their links included.
        result = await keep_result(
            self.resources, with_tests(found.outcome), root_run, operation_id
        )
        return msgspec.structs.replace(found, outcome=result)

    def _deadline(
        self, deadline_unix_ms: int | None, ceiling: float | None = None
    ) -> tuple[float, int]:
        """A monotonic deadline from now (the caller's, the root's, or the ceiling), and now
        in Unix ms: the instant it runs from, a statement's `startedOn`."""
        now = unix_ms()
        deadline = effective_deadline(
            time.monotonic(),
            now,
            deadline_unix_ms,
            self._root_deadline,
            **({"ceiling": ceiling} if ceiling is not None else {}),
        )
        return deadline, now


def _refused_before_dispatch(deadline: float, cancel: CancelSignal) -> JigError | None:
    """Why nothing may be dispatched any more (the deadline passed, a cancel came), if so."""
    if deadline <= time.monotonic():
        return JigError(
            Code.DEADLINE_EXCEEDED, "the deadline had passed before dispatch; nothing ran"
        )
    if cancel.is_set():
        return before_dispatch(deadline=cancel.deadline_passed())
    return None
