"""The jarvis tool path, independent of HTTP: decide, audit, plan, execute, record.

Every decision is audited before anything else happens; a denied request never reaches the
planner or the executor. So is every refusal (`refusals.py`): a call's own with what it
sent, those before authentication counted. Allowed runs are recorded as running before
dispatch and run as tasks of the service, so a caller can be answered early (`status:
"running"`) and poll.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from functools import partial
from typing import Any

import anyio
import anyio.abc

from jigcmd.cancel import CancelSignal
from jigcmd.command.failures import envelope_error
from jigcmd.command.placement import Placement
from jigcmd.durable.recovery import RecoveryReport
from jigcmd.envelope.api import EnvelopeFailure, Executor, Ticket
from jigcmd.errors import JigError
from jigcmd.jarvis.auditing import AuditTrail
from jigcmd.jarvis.fields import (
    decision_fields,
    end_fields,
    executes,
    failure_status,
    record_fields,
)
from jigcmd.jarvis.headaudits import RefusedHeads
from jigcmd.jarvis.journalcalls import JournalCalls, RunUnrecorded
from jigcmd.jarvis.planner import host_plan, system_binds
from jigcmd.jarvis.policy import Decision, HostView, Policy, Request, evaluate
from jigcmd.jarvis.refusals import UNAUTHENTICATED_ROW_S, Unauthenticated
from jigcmd.jarvis.slotwait import RETRY_AFTER, SlotWaits
from jigcmd.jarvis.startup import recover_at_start
from jigcmd.jarvis.statements import RunSigning, Sign
from jigcmd.jarvis.tools import ToolError, decode_run_id, decode_run_request
from jigcmd.journal.failures import call_refused, unwritable
from jigcmd.journal.reservations import Reservations, Slot
from jigcmd.journal.store import Journal, JournalUnusable
from jigcmd.plan import RunPlan

__all__ = ["DEFAULT_QUEUE_WAIT_S", "EARLY_ANSWER_SECONDS", "MAX_ACTIVE_RUNS", "JarvisService"]

logger = logging.getLogger("jigcmd.jarvis")

# UTCP's HTTP client gives up after 30 s; answer before that and let the caller poll.
EARLY_ANSWER_SECONDS = 25.0
MAX_ACTIVE_RUNS = 32
# How long a `run.create` may wait for an envelope slot (`--queue-wait`); never past the early
# answer either, so that the caller hears back before its client gives up.
DEFAULT_QUEUE_WAIT_S = 20.0

# The detail of a run whose row was begun but whose start could not be audited.
_UNSTARTED = "not started: its start could not be audited; nothing ran"


class JarvisService:
    """Serves the three tools for one policy, executor and store."""

    def __init__(
        self,
        *,
        policy: Policy,
        executor: Executor,
        store: Journal,
        host: HostView,
        host_env: Mapping[str, str],
        early_answer_seconds: float = EARLY_ANSWER_SECONDS,
        max_active_runs: int = MAX_ACTIVE_RUNS,
        reservations: Reservations | None = None,
        queue_wait: float = DEFAULT_QUEUE_WAIT_S,
        signing: RunSigning | None = None,
        unauthenticated_row_s: float = UNAUTHENTICATED_ROW_S,
        recovery: Callable[[], RecoveryReport] | None = None,
        placement: Placement | None = None,
    ) -> None:
        self.policy = policy
        # Where runs go: the live pins and the cgroup base's cpuset (`command.placement`).
        self._placement = placement or Placement()
        # What a dead jigcmd left in the shared state directory besides jarvis's own rows
        # (its envelopes' registry entries, their cgroup jobs, serve's rows): `durable.recovery`.
        self._recovery = recovery
        # Signs each completed run's statement (`jigcmd.jarvis.statements`).
        self._signing = signing
        self._stop = CancelSignal()
        self._executor = executor
        self.store = store
        self._host = host
        # Only the names some rule allow-lists are kept: the server's secrets stay out.
        wanted = {name for rule in policy.rules for name in rule.env}
        self._host_env = {k: v for k, v in host_env.items() if k in wanted}
        self._binds = system_binds(policy, host)
        self._early = early_answer_seconds
        self._max_active = max_active_runs
        # Calls admitted as active runs (`_admit`), from the slot until the run's row is
        # closed; `_active` holds those already started.
        self._admitted = 0
        self._active: dict[int, tuple[CancelSignal, anyio.Event]] = {}
        self._tasks: anyio.abc.TaskGroup | None = None
        # Every store call: one at a time, off the event loop, refused once the journal is lost.
        self._db = JournalCalls(store)
        self._trail = AuditTrail(store, self._db, Unauthenticated(unauthenticated_row_s))
        # Refused heads' rows, written by one task; set once the server served its last.
        self._heads = RefusedHeads()
        self._served = CancelSignal()
        # The calls of this process waiting for an envelope slot (first come, first served).
        self._slots = SlotWaits(
            reservations, self._trail, self._stop, queue_wait, early_answer_seconds
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[JarvisService]:
        """Own the runs' task group; on exit every still-running run is cancelled and recorded."""
        with contextlib.suppress(JournalUnusable):
            # Lost already (`must_stop` is set): the server stops as soon as it started.
            await recover_at_start(self.store, self._db, self._trail, self._recovery)
        start = getattr(self._executor, "start", None)
        if start is not None:
            await start()
        try:
            async with anyio.create_task_group() as tasks:
                self._tasks = tasks
                tasks.start_soon(
                    self._trail.unauthenticated.run, self._stop, self._trail.unauthenticated_row
                )
                tasks.start_soon(self._heads.run, self._served, self._head_row, self._head_summary)
                try:
                    yield self
                finally:
                    # Its connections are closed: the refused heads' rows left are written now.
                    self._served.set()
                    self.stop()
                    self._tasks = None
        finally:
            close = getattr(self._executor, "aclose", None)
            if close is not None:
                with anyio.CancelScope(shield=True):
                    await close()

    def stop(self) -> None:
        """The server stops: calls waiting for a slot are answered at once, every run is fenced.

        Each fenced run ends `failed` (`cancelled: the server shut down`), recorded and
        answered to a caller still waiting for it.
        """
        self._stop.set()
        for cancel, _ in self._active.values():
            cancel.set()

    @property
    def must_stop(self) -> CancelSignal:
        """Set when the service cannot go on (its journal lost): the server must stop."""
        return self._db.lost

    async def check(self, actor: str, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """`jarvis.policy.check`: the decision alone."""
        request = await self._trail.decoded(decode_run_request, actor, tool, args)
        decision = evaluate(self.policy, request, self._host)
        await self._trail.decision(
            actor, tool, request, decision, f"checked: {decision.decision}{executes(decision)}"
        )
        return decision_fields(decision)

    async def create(
        self, actor: str, tool: str, args: Mapping[str, Any], gone: CancelSignal | None = None
    ) -> dict[str, Any]:
        """`jarvis.run.create`: decide; if allowed, run and answer (early when it is long).

        `gone` is set when the caller goes away: while it waits for a slot, it then gets no
        run (audited `cancelled: …`); once its run started, the run goes on to its end.
        """
        arrived = time.monotonic()
        request = await self._trail.decoded(decode_run_request, actor, tool, args)
        decision = evaluate(self.policy, request, self._host)
        if decision.decision == "deny":
            await self._trail.decision(actor, tool, request, decision, "denied: no process started")
            return {
                **decision_fields(decision),
                "run_id": None,
                "status": "denied",
                "exit_code": None,
            }
        if self._tasks is None:
            raise ToolError(503, "jarvis is not running")
        slot = await self._slots.take(actor, tool, request, decision, arrived=arrived, gone=gone)
        await self._admit(actor, tool, request, decision, slot)
        run_id: int | None = None
        try:
            plan = await self._plan(actor, tool, request, decision, slot)
            await self._recordable(actor, tool, request, decision)
            run_id = await self._begin(actor, tool, request, decision)
            await self._trail.decision(
                actor, tool, request, decision, f"started run {run_id}{executes(decision)}"
            )
        except BaseException:
            # Nothing was started: the count and the slot are given back, and a row already
            # begun is closed `failed` (else it stays `running`, and the next start would
            # call it `uncertain`, as if it had run when its process died).
            self._admitted -= 1
            if slot is not None:
                self._release(slot)
            if run_id is not None:
                await self._unstarted(run_id)
            raise
        done = self._start(
            run_id,
            partial(
                self._run,
                actor=actor,
                tool=tool,
                request=request,
                decision=decision,
                run_id=run_id,
                plan=plan,
                slot=slot,
            ),
        )
        # Counted from the call's arrival: a wait for a slot does not delay the early answer.
        with anyio.move_on_after(arrived + self._early - time.monotonic()):
            await done.wait()
        try:
            fields = await self._run_fields(run_id)
        except JournalUnusable as exc:
            # Its start was recorded: the caller learns which run it cannot read now.
            raise RunUnrecorded(exc, run_id) from exc
        return {**decision_fields(decision), **fields}

    async def _admit(
        self, actor: str, tool: str, request: Request, decision: Decision, slot: Slot | None
    ) -> None:
        """Count the call as an active run, or refuse it (429, audited; its slot let go of).

        Checked and counted with no await between, so that a burst of calls cannot all pass
        the check before any of them is counted; the count drops when the run's row closes.
        """
        if self._admitted < self._max_active:
            self._admitted += 1
            return
        if slot is not None:
            self._release(slot)
        message = f"too many active runs (at most {self._max_active})"
        await self._trail.decision(actor, tool, request, decision, f"refused: {message}")
        raise ToolError(429, message, headers=RETRY_AFTER)

    async def _plan(
        self, actor: str, tool: str, request: Request, decision: Decision, slot: Slot | None
    ) -> RunPlan:
        """The run's plan, made once the slot is held: its own timeout starts only now."""
        plan = host_plan(
            decision,
            policy=self.policy,
            argv=request.argv,
            binds=self._binds,
            host_env=self._host_env,
            now_monotonic=time.monotonic(),
        )
        # The CPUs its quota pays for, spread by slot like every envelope (`placement`).
        try:
            cpus = self._placement.place(plan.limits, slot.index if slot else None)
        except JigError as exc:
            # No CPU to place it on: refused like any run that never started, and audited.
            await self._trail.decision(actor, tool, request, decision, f"refused: {exc.message}")
            raise ToolError(503, exc.message) from None
        return plan._replace(cpus=cpus)

    async def _recordable(
        self, actor: str, tool: str, request: Request, decision: Decision
    ) -> None:
        """Refuse (503) a run its journal has too little room to record, as serve does."""
        refusal = unwritable(self.store.path)
        if refusal is None:
            return
        message = call_refused(refusal)
        # Best effort: on a full disk the audit row may not fit either.
        with contextlib.suppress(sqlite3.Error, OSError):
            await self._trail.decision(actor, tool, request, decision, f"refused: {message}")
        raise ToolError(503, message)

    async def _begin(self, actor: str, tool: str, request: Request, decision: Decision) -> int:
        """The run's journal row, begun."""
        return await self._db(
            partial(
                self.store.jarvis_begin,
                tool=tool,
                argv=request.argv,
                cwd=decision.cwd or "",
                actor=actor,
                decision="allow",
                matched_rule=decision.matched_rule,
                reason=decision.reason,
                executable=decision.executable,
            )
        )

    async def _unstarted(self, run_id: int) -> None:
        """Close the row of a run that was never started as `failed`, even while cancelled.

        Best effort: the journal may be what failed; the row is then left for the start-up recovery.
        """
        with anyio.CancelScope(shield=True):
            try:
                await self._db(
                    partial(
                        self.store.jarvis_finish,
                        run_id,
                        status="failed",
                        detail=_UNSTARTED,
                    )
                )
            except JournalUnusable:
                pass  # lost: jarvis stops, and says so once as it exits
            except Exception:
                logger.exception("run %d: cannot record that it never started", run_id)

    def _start(self, run_id: int, run: Callable[[], Coroutine[Any, Any, None]]) -> anyio.Event:
        """Run `run` (`_run`) beside the call; the event is set once the run's row is closed."""
        # Still set: `running` leaves (and clears it) only after the HTTP server drained every
        # call, and `stop`, which comes first, answers a call still waiting for a slot at once.
        assert self._tasks is not None
        cancel, done = CancelSignal(), anyio.Event()
        self._active[run_id] = (cancel, done)
        if self._stop.is_set():
            # The server began stopping while this run was being recorded: fenced at once.
            cancel.set()
        self._tasks.start_soon(run)
        return done

    @property
    def waiting_for_slots(self) -> int:
        """How many `run.create` calls wait for an envelope slot now."""
        return self._slots.waiting

    def _release(self, slot: Slot) -> None:
        """Give a slot back; the first call waiting for one looks at once."""
        self._slots.release(slot)

    async def get(self, actor: str, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """`jarvis.run.get`: the stored record of one run."""
        run_id = await self._trail.decoded(decode_run_id, actor, tool, args)
        record = await self._db(partial(self.store.jarvis_get, run_id))
        if record is None or record.decision != "allow":
            refusal = ToolError(404, f"no run with run_id {run_id}")
            await self.audit_refusal(actor, tool, refusal)
            raise refusal
        return {
            **record_fields(record),
            "argv": list(record.argv),
            "cwd": record.cwd or None,
            "matched_rule": record.matched_rule,
            "created_unix_ms": record.created_unix_ms,
            "finished_unix_ms": record.finished_unix_ms,
            "wall_ms": record.timings.get("wall_ms"),
            "setup_ms": record.timings.get("setup_ms"),
        }

    async def wait_run(self, run_id: int) -> None:
        """Return once `run_id` is no longer running (immediately if it is not active)."""
        entry = self._active.get(run_id)
        if entry is not None:
            await entry[1].wait()

    async def _run_fields(self, run_id: int) -> dict[str, Any]:
        record = await self._db(partial(self.store.jarvis_get, run_id))
        assert record is not None
        return record_fields(record)

    async def _run(
        self,
        *,
        actor: str,
        tool: str,
        request: Request,
        decision: Decision,
        run_id: int,
        plan: RunPlan,
        slot: Slot | None = None,
    ) -> None:
        cancel, done = self._active[run_id]
        sign = None
        if self._signing is not None:
            sign = self._signing.signer(
                actor=actor, tool=tool, argv=request.argv, decision=decision, plan=plan
            )
        try:
            end = await self._execute(run_id, plan, cancel, slot, sign)
            with anyio.CancelScope(shield=True):
                await self._finish(
                    actor=actor,
                    tool=tool,
                    request=request,
                    decision=decision,
                    run_id=run_id,
                    end=end,
                )
        except JournalUnusable:
            pass  # its end cannot be recorded: jarvis stops, and says so once as it exits
        finally:
            if slot is not None:
                self._release(slot)
            del self._active[run_id]
            self._admitted -= 1
            done.set()

    async def _finish(
        self,
        *,
        actor: str,
        tool: str,
        request: Request,
        decision: Decision,
        run_id: int,
        end: dict[str, Any],
    ) -> None:
        """The run's row closed with its end, and its end audited."""
        await self._db(partial(self.store.jarvis_finish, run_id, **end))
        outcome = str(end["status"])
        if end.get("exit_code") is not None:
            outcome += f" (exit {end['exit_code']})"
        if end.get("signal"):
            outcome += f" ({end['signal']})"
        if end.get("detail"):
            outcome += f": {end['detail']}"
        await self._trail.decision(actor, tool, request, decision, f"run {run_id}: {outcome}")

    async def _execute(
        self,
        run_id: int,
        plan: RunPlan,
        cancel: CancelSignal,
        slot: Slot | None = None,
        sign: Sign | None = None,
    ) -> dict[str, Any]:
        """The `jarvis_finish` fields for how the run ended (with its statement, if signed)."""
        ticket = Ticket(run_id=f"j{run_id}x{os.getpid()}", slot_fd=slot.fd if slot else None)
        try:
            outcome = await self._executor.execute(plan, cancel, ticket)
        except EnvelopeFailure as failure:
            # The caller reads the words the wire would carry; the status is jarvis's own.
            error = envelope_error(failure)
            logger.warning("run %d: %s: %s", run_id, error.code.value, error.message)
            detail = f"{error.code.value}: {error.message}"
            return {"status": failure_status(failure), "detail": detail}
        except Exception as exc:
            # Not one of the executor's own failures: whether anything ran is unknown.
            logger.exception("run %d: unexpected executor failure", run_id)
            return {"status": "uncertain", "detail": f"unexpected: {exc}"}
        end = end_fields(outcome)
        if sign is not None and end["status"] in ("exited", "deadline"):
            # Its end and its cleanup are proved: signed now, written with the end.
            end["attestation"] = sign(run_id, ticket.run_id, outcome)
        return end

    def audit_refusal(
        self, actor: str, tool: str, refusal: ToolError, args: object = None
    ) -> Awaitable[None]:
        """Audit a call refused before policy evaluation (`AuditTrail.refusal`)."""
        return self._trail.refusal(actor, tool, refusal, args)

    def audit_refused_head(self, actor: str, tool: str, refusal: ToolError) -> None:
        """Queue the row of a head refused before the application (`headaudits.py`)."""
        self._heads.note(actor, tool, refusal)

    async def _head_row(self, actor: str, tool: str, refusal: ToolError) -> None:
        # A journal lost meanwhile is left for the server to report as it stops.
        with contextlib.suppress(JournalUnusable):
            await self._trail.refusal(actor, tool, refusal)

    async def _head_summary(self, actor: str, outcome: str) -> None:
        with contextlib.suppress(JournalUnusable):
            await self._trail.row(actor=actor, tool="", decision="invalid", outcome=outcome)

    def audit_unauthenticated(self, reason: str) -> None:
        """Count a request refused before it authenticated (`refusals.Unauthenticated`)."""
        self._trail.unauthenticated.note(reason)
