"""The server's side of durable ownership: the journal row per operation, and envelope slots.

Every jigcmd process using the same state directory shares one journal and one set of
envelope slots; operation identity is scoped to the caller's run within it (`root_run`: the
same run id across restarts replays, joins or conflicts; another run runs its own request).
Before dispatch a row
records the operation; the serving envelope is recorded as soon as it reports, and its
supervisor closes the row itself if the server dies; a recorded result is replayed byte
for byte; an uncertain operation stays uncertain.
"""

from __future__ import annotations

import logging
import math
import time
from functools import partial
from pathlib import Path
from typing import NamedTuple

import anyio
import msgspec

from jigcmd.cancel import CancelSignal
from jigcmd.clock import unix_ms
from jigcmd.durable.evidencesync import RecordedEvidence, commit_evidence, synced
from jigcmd.durable.joining import (
    Joined,
    Joiner,
    finish_passes,
    join_running,
    others_waiting,
)
from jigcmd.durable.pathwrite import write_soon
from jigcmd.durable.recovery import RecoveryReport, pending, recover, sweep_own
from jigcmd.durable.replay import RecordedFailure, recorded_tests, replay
from jigcmd.durable.rowclosing import JOURNAL_FAILURES, LeftOpen, RowCloser
from jigcmd.durable.slotqueue import SlotQueue
from jigcmd.durable.statedir import prepare_state_dir
from jigcmd.envelope.api import Assigned, EnvelopeIdentity
from jigcmd.envelope.cgroups import CgroupBackend
from jigcmd.errors import Code, JigError, operation_conflict
from jigcmd.evidence import Evidence
from jigcmd.journal.failures import call_refused, unusable, unwritable
from jigcmd.journal.identity import identify
from jigcmd.journal.reservations import Reservations, Slot, default_slots
from jigcmd.journal.rows import NewRow, Row
from jigcmd.journal.store import Journal
from jigcmd.protocol.commands import Recorded, RunResult

__all__ = ["Began", "Ownership"]

logger = logging.getLogger(__name__)

_encoder = msgspec.json.Encoder()


class Began(NamedTuple):
    """A new row was written: the caller dispatches. When, as the row says (`created_unix_ms`)."""

    created_unix_ms: int


class Ownership:
    """The journal and the envelope slots of one state directory."""

    def __init__(self, state_dir: Path, journal: Journal, reservations: Reservations) -> None:
        self.state_dir = state_dir
        self.journal = journal
        self.reservations = reservations
        # Callers of this process waiting for a slot, first come, first served.
        self.slots = SlotQueue(self._take_slot, reservations.exhausted_message)
        # Rows of ours answered but not closed (their outcome unwritten, or only their close
        # refused): closed as answered as soon as the journal takes a write again.
        self._left_open = LeftOpen(journal)
        # Closes rows whose evidence is already durable, as their answer goes out.
        self._closer = RowCloser(self._left_open)
        # What fences the run of a dead server a caller here joined (None: no cgroups).
        self.backend: CgroupBackend | None = None

    @classmethod
    def open(cls, state_dir: Path, max_envelopes: int | None, memory_bytes: int) -> Ownership:
        """Prepare the state directory (0700, ours) and open its journal and slots.

        Raises `JournalUnusable` when `Journal.open` cannot use the journal. Little free
        space is no refusal here: replays write nothing, and `begin` refuses each new call.
        """
        state = prepare_state_dir(state_dir)
        slots = max_envelopes if max_envelopes is not None else default_slots(memory_bytes)
        journal = Journal.open(state)
        # The evidence's AIO context now: fs.aio-max-nr is host-wide, and a context made at
        # the start is not lost to a host process that fills it later (the zygote is exec'd,
        # so it maps none of it). Without one, syncs are made in place as before.
        journal.prepare_syncs()
        return cls(state, journal, Reservations(state, slots))

    def close(self) -> None:
        """Finish the pending row closes (left-open ones too), then close the journal."""
        self._closer.shutdown()
        finish_passes()  # a joiner's recovery pass still writing to the journal
        self._left_open.shutdown()
        self.journal.close()

    def recover(self, backend: CgroupBackend) -> RecoveryReport:
        """Close every run a dead server left open (blocking; call from a worker thread).

        Raises `JournalUnusable` when the journal cannot be read or written (damaged, full).
        """
        try:
            return recover(self.journal, backend)
        except JOURNAL_FAILURES as exc:
            raise unusable(self.journal.path, exc) from exc

    def sweep(self, backend: CgroupBackend) -> None:
        """At a clean exit (executor closed): release what this process's killed envelopes left.

        Best effort: what it cannot prove is logged and left to the next `recover`.
        """
        try:
            report = sweep_own(self.journal, backend)
        except JOURNAL_FAILURES as exc:
            logger.warning("the sweep at exit could not read or write the journal: %s", exc)
            return
        if not report.clean:
            logger.warning("the sweep at exit could not confirm every cleanup: %s", report)

    def reserve(self, tag: str) -> Slot:
        """An envelope slot, at once, or `RESOURCE_EXHAUSTED` (no queue, no scheduler).

        A slot that cannot be taken (a full disk) is `EXECUTION_FAILED`, naming the cause.
        """
        slot = self._take_slot(tag)
        if slot is None:
            raise JigError(Code.RESOURCE_EXHAUSTED, self.reservations.exhausted_message())
        return slot

    def release(self, slot: Slot) -> None:
        """Give a slot back; the first caller waiting for one (`slots`) looks at once."""
        slot.release()
        self.slots.released()

    def _take_slot(self, tag: str) -> Slot | None:
        try:
            slot = self.reservations.acquire(tag)
        except OSError as exc:
            # The slots went with a removed state directory: say that, as `begin` would.
            lost = self.journal.lost()
            if lost is not None:
                why = f"the journal {self.journal.path} could not record the operation before "
                why += f"dispatch: {lost.cause}"
            else:
                why = f"cannot take an envelope slot in {self.reservations.directory}: "
                why += exc.strerror or str(exc)
            raise JigError(Code.EXECUTION_FAILED, f"{why}; nothing ran") from exc
        return slot

    async def lookup(
        self,
        operation_id: str,
        signature: str,
        *,
        root_run: str,
        deadline: float = math.inf,
        cancel: CancelSignal | None = None,
        joined: Joined | None = None,
    ) -> RunResult | None:
        """Answer a known operation from the journal without taking a slot; None if unknown.

        An operation still running elsewhere is joined until this caller's `deadline`
        (monotonic) or `cancel` (`joined` is told as it joins); see `_join`. A call the
        Binding refused joins too: a join runs nothing. A row of another signature is
        `OPERATION_CONFLICT`, as the id is taken by a different request.
        """
        row = await anyio.to_thread.run_sync(
            lambda: self.journal.get(operation_id, root_run=root_run)
        )
        if row is None:
            return None
        if row.signature != signature:
            raise operation_conflict(operation_id, running=row.is_open)
        # A row recovery closed but has not fenced yet is joined too: its run may still live.
        if row.is_open or pending(row):
            row = await self._join(operation_id, root_run, deadline, cancel, joined)
        return replay(row)

    async def recorded(self, operation_id: str, *, root_run: str) -> Recorded | None:
        """What the journal holds of an operation of `root_run` (read only); None if nothing."""
        row = await anyio.to_thread.run_sync(
            lambda: self.journal.get(operation_id, root_run=root_run)
        )
        if row is None:
            return None
        left = self._left_open.answered((root_run, operation_id)) if row.is_open else None
        if left is not None:
            uncertain = JigError(Code.UNCERTAIN, left, recorded=True)
            return Recorded(False, row.created_unix_ms, row.updated_unix_ms, uncertain)
        if row.is_open:
            return Recorded(True, row.created_unix_ms, row.updated_unix_ms)
        outcome: RunResult | JigError
        try:
            outcome = replay(row)
        except JigError as error:
            outcome = error
        updated = row.finished_unix_ms or row.updated_unix_ms
        return Recorded(False, row.created_unix_ms, updated, outcome)

    async def begin(
        self,
        *,
        root_run: str,
        operation_id: str,
        signature: str,
        context: str,
        deadline: float,
        run_id: str,
        envelope: Assigned | None = None,
        plan_digest: str | None = None,
        cancel: CancelSignal | None = None,
        trace_context: dict[str, str] | None = None,
        joined: Joined | None = None,
        deadline_unix_ms: int | None = None,
    ) -> RunResult | Began:
        """Record the operation before dispatch; or answer it from the journal.

        With `envelope` (the prepared envelope the launch went to) the new row names it
        already (`running`); a new row keeps `plan_digest`, the identity of its plan, and
        `deadline_unix_ms`, the deadline as the call reckoned it from its start (else
        `deadline` read back in Unix ms now, which rounds twice).
        `Began`: a new row was written and the caller dispatches. Otherwise the operation is
        known: its recorded result is replayed (or raised), an in-flight one is joined, an
        uncertain one is `UNCERTAIN`, a different request is `OPERATION_CONFLICT`.
        """
        refusal = unwritable(self.journal.path)
        if refusal is not None:
            # Below `LEAST_FREE_BYTES` (what `jigcmd doctor` warns of): a known operation is
            # still answered, as it needs no write; a new one is refused before any write.
            known = await self.lookup(
                operation_id,
                signature,
                root_run=root_run,
                deadline=deadline,
                cancel=cancel,
                joined=joined,
            )
            if known is None:
                raise JigError(Code.EXECUTION_FAILED, call_refused(refusal))
            return known
        if deadline_unix_ms is None:
            deadline_unix_ms = unix_ms() + int(max(0.0, deadline - time.monotonic()) * 1000)
        new = NewRow(
            root_run=root_run,
            operation_id=operation_id,
            signature=signature,
            context=context,
            deadline_unix_ms=deadline_unix_ms,
            run_id=run_id,
            supervisor=None if envelope is None else envelope.supervisor,
            cgroup_paths=() if envelope is None else envelope.cgroup_paths,
            plan_digest=plan_digest,
            trace=_encoder.encode(trace_context).decode() if trace_context else None,
        )
        # On the request's path (the staged candidate waits for it): see `pathwrite`.
        try:
            begun = await write_soon(
                partial(self.journal.begin_now, new), partial(self.journal.begin, new)
            )
        except JOURNAL_FAILURES as exc:
            # No row was written, so nothing may run; and nothing is known to be kept.
            raise JigError(
                Code.EXECUTION_FAILED,
                f"the journal {self.journal.path} could not record the operation before "
                f"dispatch: {_cause(exc)}; nothing ran",
            ) from exc
        verdict = begun.verdict(signature)
        if verdict is None:
            await self._close_left_open()
            return Began(begun.row.created_unix_ms)
        if verdict == "conflict":
            raise operation_conflict(operation_id, running=begun.row.is_open)
        row = begun.row
        # A row recovery closed but has not fenced yet is not final (as in `lookup`).
        if verdict == "join" or pending(row):
            row = await self._join(operation_id, root_run, deadline, cancel, joined)
        return replay(row)

    async def others_waiting(self, operation_id: str, *, root_run: str) -> bool:
        """Whether a live process other than this one waits for the operation (`_join`)."""
        return await others_waiting(self.journal, operation_id, root_run=root_run)

    async def _join(
        self,
        operation_id: str,
        root_run: str,
        deadline: float,
        cancel: CancelSignal | None,
        joined: Joined | None,
    ) -> Row:
        """Wait for the operation running elsewhere to close (`joining.join_running`)."""
        # In Unix ms as `begin` keeps the work's, where the two are compared.
        when = None
        if math.isfinite(deadline):
            when = unix_ms() + int(max(0.0, deadline - time.monotonic()) * 1000)
        joiner = Joiner(operation_id, root_run, deadline, cancel, when, joined, self.backend)
        return await join_running(self.journal, joiner, self._left_open, self._close_left_open)

    async def record_envelope(
        self, operation_id: str, envelope: EnvelopeIdentity, *, root_run: str
    ) -> None:
        """Record which envelope serves the operation (its supervisor, cgroups, netns)."""
        supervisor = identify(envelope.supervisor_pid)
        if supervisor is None:
            return  # already gone: its own registry entry and the outcome tell the rest
        try:
            await anyio.to_thread.run_sync(
                lambda: self.journal.record_envelope(
                    operation_id,
                    root_run=root_run,
                    supervisor=supervisor,
                    cgroup_paths=envelope.cgroup_paths,
                    netns=envelope.netns,
                )
            )
        except JOURNAL_FAILURES as exc:
            # The run goes on: the envelope's own registry entry names it for recovery.
            logger.warning("the journal could not record the envelope of %s: %s", operation_id, exc)

    async def record_evidence(
        self,
        operation_id: str,
        evidence: Evidence,
        *,
        root_run: str,
        attestation: bytes | None = None,
    ) -> RecordedEvidence | None:
        """Make a run's evidence (and its signed statement) durable on its open row.

        The row stays open (its cleanup is not proved yet): if the server dies now, recovery
        (or the supervisor) closes it `done` with this evidence and statement once it proves
        the cleanup, else `uncertain` (and the statement goes). Returns what was recorded, or
        None when the row was closed or the journal failed.

        Committed on the loop when it can be, its sync then left in flight (`sync_soon`):
        the run's end goes on meanwhile, and `finish` waits for the sync before the answer.
        """
        return await commit_evidence(
            self.journal,
            operation_id,
            _encoder.encode(evidence),
            root_run=root_run,
            attestation=attestation,
        )

    async def finish(
        self,
        operation_id: str,
        result: RunResult,
        *,
        root_run: str,
        recorded: RecordedEvidence | None = None,
    ) -> int:
        """Record a completed command's evidence; the cleanup was confirmed by the envelope.

        Returns when the row says it ended (the same however late its close is written).

        When `recorded` (from `record_evidence`) holds these very bytes, the evidence is
        durable once its sync lands, and only the close is left (cleanup proved, the report):
        it is made at once, before the answer, without an fsync (`RowCloser.close`). A close
        a full disk refuses is retried while this server lives and at its exit (`LeftOpen`);
        one lost to a crash or a power cut is re-derived: the row is open with its evidence,
        and recovery closes it `done` once it proves the cleanup (`Journal.close_lost`). A
        replay meanwhile joins until it closes.
        """
        data = _encoder.encode(result.evidence)
        ended = unix_ms()
        close = partial(
            self.journal.finish,
            operation_id,
            root_run=root_run,
            outcome="evidence",
            result=data,
            report=_encoder.encode(result.report),
            cleanup_complete=True,
            attestation=result.attestation,
            tests=recorded_tests(result.tests, result.ends, result.notes),
            ended_unix_ms=ended,
        )
        if recorded is not None and recorded.data == data and await synced(self.journal, recorded):
            self._closer.close((root_run, operation_id), close)
            return ended
        try:
            await anyio.to_thread.run_sync(close)
        except JOURNAL_FAILURES as exc:
            what = "the command ran, but"
            raise self._unrecorded((root_run, operation_id), what, exc, True) from exc
        return ended

    async def fail(self, operation_id: str, error: JigError, *, root_run: str) -> int:
        """Record a failure; `UNCERTAIN` closes the row as uncertain for good. Returns when
        the row says it ended.

        A failure the journal cannot record is `UNCERTAIN`: the row stays open, and recovery
        closes it uncertain, so the answer now and a replay later agree.
        """
        ended = unix_ms()
        try:
            if error.code == Code.UNCERTAIN:
                # The run's end is unknown; its cleanup may still have been proved.
                await anyio.to_thread.run_sync(
                    lambda: self.journal.mark_uncertain(
                        operation_id,
                        root_run=root_run,
                        reason=error.message,
                        cleanup_complete=error.cleanup_proved,
                        problems="" if error.cleanup_proved else error.message,
                        ended_unix_ms=ended,
                    )
                )
                return ended
            recorded = RecordedFailure(
                code=error.code, message=error.message, details=error.details
            )
            await anyio.to_thread.run_sync(
                lambda: self.journal.finish(
                    operation_id,
                    root_run=root_run,
                    outcome="failure",
                    result=_encoder.encode(recorded),
                    report=None,
                    cleanup_complete=True,
                    attestation=error.attestation,
                    # A test command stopped by its deadline or a cancel: why it has no report.
                    tests=recorded_tests(error.tests, error.ends, error.notes),
                    ended_unix_ms=ended,
                )
            )
        except JOURNAL_FAILURES as exc:
            what = f"the operation failed ({error.message}), but"
            proved = error.cleanup_proved if error.code == Code.UNCERTAIN else True
            raise self._unrecorded((root_run, operation_id), what, exc, proved) from exc
        return ended

    async def _close_left_open(self) -> None:
        """Close the rows left open uncertain, now that the journal may take writes again."""
        if self._left_open:
            await anyio.to_thread.run_sync(self._left_open.close_all)

    def _unrecorded(
        self, key: tuple[str, str], what: str, exc: BaseException, cleanup_proved: bool
    ) -> JigError:
        # `recorded`: the row is closed uncertain in these words at this server's next write
        # that succeeds or its exit (else by recovery), so a replay answers the same; this
        # is the operation's outcome, and a retry here meanwhile gets it again (`_join`).
        message = (
            f"{what} the journal {self.journal.path} could not record its outcome: "
            # Words that stay true once the row is closed in them (replays answer the same).
            f"{_cause(exc)}, so its outcome is uncertain: no result of it is kept"
        )
        error = JigError(Code.UNCERTAIN, message, recorded=True)
        error.ended_unix_ms = unix_ms()
        self._left_open.add(key, error, cleanup_proved=cleanup_proved)
        return error


def _cause(exc: BaseException) -> str:
    """The failure's own words, e.g. "database or disk is full" or "No space left on device"."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
