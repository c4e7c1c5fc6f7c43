"""A full disk at each durable step: nothing acquired outlives the failure, nothing is lost."""

from __future__ import annotations

import errno
import logging
import os
import time

import anyio
import pytest

from jigcmd.durable.ownership import Began, Ownership
from jigcmd.envelope.api import EnvelopeIdentity
from jigcmd.errors import Code, JigError
from jigcmd.journal.reservations import Reservations
from jigcmd.journal.store import Journal
from jigcmd.protocol.commands import RunResult
from tests.durable.test_ownership import EVIDENCE, REPORT, RUN
from tests.faults.disk import SmallDisk


def test_a_slot_whose_tag_cannot_be_written_is_free_again_once_space_returns(
    small_disk: SmallDisk,
) -> None:
    """Acquiring on a full disk fails with ENOSPC and leaves the slot free, not wedged."""
    slots = Reservations(small_disk.path, 1)
    small_disk.fill()
    with pytest.raises(OSError, match="No space left") as failed:
        slots.acquire("op-1")
    assert failed.value.errno == errno.ENOSPC
    assert slots.in_use() == 0
    small_disk.free()
    slot = slots.acquire("op-2")
    assert slot is not None
    slot.release()


def test_a_full_disk_when_taking_a_slot_is_execution_failed_naming_the_cause(
    small_disk: SmallDisk,
) -> None:
    """The server's reservation turns ENOSPC into EXECUTION_FAILED (nothing ran), not a crash."""
    ownership = Ownership.open(small_disk.path, 2, 256 * 1024 * 1024)
    try:
        small_disk.fill()
        with pytest.raises(JigError) as failed:
            ownership.reserve("op-1")
        assert failed.value.code is Code.EXECUTION_FAILED
        assert "No space left on device" in failed.value.message
        assert "nothing ran" in failed.value.message
        assert ownership.reservations.in_use() == 0
    finally:
        ownership.close()


def _new_row(operation_id: str) -> dict[str, object]:
    return {
        "root_run": RUN,
        "operation_id": operation_id,
        "signature": "sig",
        "context": "test",
        "deadline": time.monotonic() + 10,
        "run_id": operation_id.replace("-", "") + "run",
    }


def test_a_full_journal_at_begin_is_execution_failed_naming_the_journal_and_not_kept(
    small_disk: SmallDisk,
) -> None:
    """Nothing ran and no row exists: EXECUTION_FAILED names the file and cause; a retry runs."""
    ownership = Ownership.open(small_disk.path, 2, 256 * 1024 * 1024)
    try:
        small_disk.fill()
        with pytest.raises(JigError) as failed:
            anyio.run(lambda: ownership.begin(**_new_row("op-1")))  # type: ignore[arg-type]
        error = failed.value
        assert error.code is Code.EXECUTION_FAILED
        assert str(ownership.journal.path) in error.message
        assert "full" in error.message
        assert "nothing ran" in error.message
        assert not error.recorded
        small_disk.free()
        assert ownership.journal.get("op-1", root_run=RUN) is None
        assert isinstance(anyio.run(lambda: ownership.begin(**_new_row("op-1"))), Began)  # type: ignore[arg-type]
    finally:
        ownership.close()


def _begun(disk: SmallDisk, operation_id: str) -> Ownership:
    ownership = Ownership.open(disk.path, 2, 256 * 1024 * 1024)
    assert isinstance(anyio.run(lambda: ownership.begin(**_new_row(operation_id))), Began)  # type: ignore[arg-type]
    return ownership


def _finish_unrecorded(ownership: Ownership) -> JigError:
    """Finish op-1 on the filled disk: the error saying its outcome could not be written."""
    with pytest.raises(JigError) as failed:
        anyio.run(
            lambda: ownership.finish(
                "op-1", RunResult(evidence=EVIDENCE, report=REPORT), root_run=RUN
            )
        )
    return failed.value


def test_evidence_the_full_journal_cannot_keep_is_answered_uncertain_and_the_row_stays_open(
    small_disk: SmallDisk,
) -> None:
    """The command ran: recording its evidence and closing its row both fail; UNCERTAIN, no lie."""
    ownership = _begun(small_disk, "op-1")
    try:
        small_disk.fill()
        assert anyio.run(lambda: ownership.record_evidence("op-1", EVIDENCE, root_run=RUN)) is None
        failed = _finish_unrecorded(ownership)
        assert failed.code is Code.UNCERTAIN
        assert str(ownership.journal.path) in failed.message
        assert "full" in failed.message
        # The row stays open and recovery closes it uncertain: the operation's outcome.
        assert failed.recorded
        row = ownership.journal.get("op-1", root_run=RUN)
        assert row is not None and row.is_open
    finally:
        ownership.close()


def test_a_retry_of_an_operation_whose_outcome_went_unrecorded_is_that_uncertain_again(
    small_disk: SmallDisk,
) -> None:
    """The row stays open, but this process runs it nowhere: a retry (space back) is answered
    the same UNCERTAIN at once, not joined until its deadline; a lookup says it ended so."""
    ownership = _begun(small_disk, "op-1")
    try:
        small_disk.fill()
        failed = _finish_unrecorded(ownership)
        small_disk.free()
        with pytest.raises(JigError) as retried:
            anyio.run(lambda: ownership.begin(**_new_row("op-1")))  # type: ignore[arg-type]
        assert (retried.value.code, retried.value.message) == (Code.UNCERTAIN, failed.message)
        assert retried.value.recorded
        found = anyio.run(lambda: ownership.recorded("op-1", root_run=RUN))
        assert found is not None and not found.open
        assert isinstance(found.outcome, JigError) and found.outcome.code is Code.UNCERTAIN
    finally:
        ownership.close()


def test_a_failure_the_full_journal_cannot_keep_is_answered_uncertain(
    small_disk: SmallDisk,
) -> None:
    """Recording a run's failure fails: the answer is UNCERTAIN naming the journal, not a crash."""
    ownership = _begun(small_disk, "op-1")
    try:
        small_disk.fill()
        deadline = JigError(Code.DEADLINE_EXCEEDED, "the command reached its deadline")
        with pytest.raises(JigError) as failed:
            anyio.run(lambda: ownership.fail("op-1", deadline, root_run=RUN))
        assert failed.value.code is Code.UNCERTAIN
        assert "reached its deadline" in failed.value.message
        assert str(ownership.journal.path) in failed.value.message
    finally:
        ownership.close()


def test_an_envelope_the_full_journal_cannot_record_does_not_stop_the_run(
    small_disk: SmallDisk,
) -> None:
    """Recording the serving envelope fails quietly: its own registry names it for recovery."""
    ownership = _begun(small_disk, "op-1")
    try:
        small_disk.fill()
        envelope = EnvelopeIdentity(
            supervisor_pid=os.getpid(), init_pid=os.getpid(), cgroup_paths=(), netns=""
        )
        anyio.run(lambda: ownership.record_envelope("op-1", envelope, root_run=RUN))
        row = ownership.journal.get("op-1", root_run=RUN)
        assert row is not None and row.state == "dispatching"
    finally:
        ownership.close()


def test_a_row_close_that_fails_on_a_full_disk_is_retried_once_space_returns(
    small_disk: SmallDisk, caplog: pytest.LogCaptureFixture
) -> None:
    """The close queued after the answer fails, is retried, and the row ends `done`."""
    ownership = _begun(small_disk, "op-1")
    closed = False
    try:
        recorded = anyio.run(lambda: ownership.record_evidence("op-1", EVIDENCE, root_run=RUN))
        assert recorded is not None
        small_disk.fill()
        with caplog.at_level(logging.WARNING, logger="jigcmd.durable.rowclosing"):
            anyio.run(
                lambda: ownership.finish(
                    "op-1",
                    RunResult(evidence=EVIDENCE, report=REPORT),
                    root_run=RUN,
                    recorded=recorded,
                )
            )
            failsafe = time.monotonic() + 30
            while "(attempt 1)" not in caplog.text and time.monotonic() < failsafe:
                time.sleep(0.01)
            assert "(attempt 1)" in caplog.text
            small_disk.free()
            ownership.close()
            closed = True
        with Journal.open(small_disk.path) as journal:
            row = journal.get("op-1", root_run=RUN)
        assert row is not None and row.state == "done"
    finally:
        if not closed:
            ownership.close()


def test_a_row_left_uncertain_is_closed_so_at_the_next_call_that_writes(
    small_disk: SmallDisk,
) -> None:
    """Its outcome unwritten, the row stayed open ("running" to every other process); the
    next call's row written, space back, it is closed uncertain in the words answered."""
    ownership = _begun(small_disk, "op-1")
    try:
        small_disk.fill()
        failed = _finish_unrecorded(ownership)
        small_disk.free()
        assert isinstance(anyio.run(lambda: ownership.begin(**_new_row("op-2"))), Began)  # type: ignore[arg-type]
        row = ownership.journal.get("op-1", root_run=RUN)
        assert row is not None and row.state == "uncertain" and row.cleanup == "complete", row
        assert row.reason == failed.message
    finally:
        ownership.close()
