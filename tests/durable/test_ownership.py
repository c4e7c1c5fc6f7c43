"""Durable operation identity through the journal: replay, conflict, uncertain, slots."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import anyio
import msgspec
import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.durable import recoverylock
from jigcmd.durable.ownership import Began, Ownership
from jigcmd.durable.recovery import UNCERTAIN_REASON
from jigcmd.durable.replay import UNRECORDED_REPORT, with_tests
from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence, ResourceReport, StreamText
from jigcmd.journal import schema
from jigcmd.protocol.commands import RunResult
from jigcmd.protocol.commands import TestResults as Results
from tests.syncfaults import failing_syncs, require_aio

# What a recovery pass records in a row it closed and has not fenced yet (`recovery.pending`).
_PENDING = "recovery started; cleanup not yet confirmed"
# The caller's run every operation of these tests belongs to.
RUN = "run-test"


EVIDENCE = Evidence(
    candidate_digest="sha256:" + "0" * 64,
    command="tests",
    invocation=["bun", "test", "test/a.test.ts"],
    stdin_digest="sha256:" + "1" * 64,
    stdout=StreamText(text="out\ufffd", truncated=False),
    stderr=StreamText(text="", truncated=True),
    exit_code=1,
    signal=None,
    stop_reason="exited",
    cleanup="complete",
)
REPORT = ResourceReport(
    wall_ms=12.5,
    setup_ms=2.0,
    cpu_ms=8.0,
    peak_memory_bytes=4096,
    oom_killed=False,
    pids_limit_hit=False,
    deadline_hit=False,
)


@pytest.fixture
def ownership(tmp_path: Path) -> Ownership:
    return Ownership.open(tmp_path / "state", max_envelopes=1, memory_bytes=256 << 20)


async def _begin(ownership: Ownership, operation_id: str, signature: str) -> RunResult | Began:
    return await ownership.begin(
        root_run=RUN,
        operation_id=operation_id,
        signature=signature,
        context="test",
        deadline=anyio.current_time() + 10,
        run_id=operation_id.replace(".", "") + "run",
    )


async def test_a_new_operation_is_recorded_and_its_evidence_replayed_exactly(
    ownership: Ownership,
) -> None:
    """After finish, a lookup with the same signature returns the same evidence and report."""
    assert await ownership.lookup("op.1", "sig", root_run=RUN) is None
    assert isinstance(await _begin(ownership, "op.1", "sig"), Began)
    ended = await ownership.finish(
        "op.1", RunResult(evidence=EVIDENCE, report=REPORT), root_run=RUN
    )
    replayed = await ownership.lookup("op.1", "sig", root_run=RUN)
    # And when it ended, as the live answer was told (an MCP task's `lastUpdatedAt`).
    assert replayed == RunResult(evidence=EVIDENCE, report=REPORT, ended_unix_ms=ended)


JUNIT = (
    b'<testsuites><testsuite name="a.test.ts" file="test/a.test.ts">'
    b'<testcase name="adds" time="0.001" line="3"><failure message="no"/></testcase>'
    b"</testsuite></testsuites>"
)


@pytest.mark.parametrize(
    "tests",
    [
        Results.read(JUNIT),
        Results.read(None, "missing"),
        Results.read(b"not xml"),
        # Bun's footer read from stderr's end past its cap: a file that failed to load.
        Results.read(
            JUNIT, evidence=EVIDENCE, stderr_tail=" 2 fail\n 1 error\nRan 1 test across 2 files.\n"
        ),
    ],
    ids=["report", "missing", "unreadable", "footer-past-the-cap"],
)
async def test_a_test_commands_report_is_replayed_as_its_answer_carried_it(
    ownership: Ownership, tests: Results
) -> None:
    """The per-test results, the report's bytes, or why there are none: all replayed.

    With the end of stderr past its cap, which alone counts a file that failed to load.
    """
    assert tests.unlisted.errors == (1 if tests.stderr_tail else 0)
    assert isinstance(await _begin(ownership, "op.t", "sig"), Began)
    answered = RunResult(evidence=EVIDENCE, report=REPORT, tests=tests)
    ended = await ownership.finish("op.t", answered, root_run=RUN)
    answered = msgspec.structs.replace(answered, ended_unix_ms=ended)
    assert await ownership.lookup("op.t", "sig", root_run=RUN) == answered
    recorded = await ownership.recorded("op.t", root_run=RUN)
    assert recorded is not None and recorded.outcome == answered


async def test_a_row_from_before_reports_were_kept_says_its_report_is_not_in_the_journal(
    tmp_path: Path,
) -> None:
    """A schema 4 journal's test run: still replayed; a front showing tests says why none."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    raw = sqlite3.connect(state / "journal.sqlite3", isolation_level=None)
    try:
        for step in schema._STEPS[:4]:
            for statement in schema._statements(step):
                raw.execute(statement)
        raw.execute(
            "INSERT INTO operations (root_run, operation_id, signature, context,"
            " created_unix_ms, updated_unix_ms, deadline_unix_ms, run_id, owner_pid,"
            " owner_start, boot_id, state, outcome, result, cleanup)"
            " VALUES (?, 'op.old', 'sig', 'c', 1, 1, 0, 'r-old', 1, 1, 'b', 'done',"
            " 'evidence', ?, 'complete')",
            (RUN, msgspec.json.encode(EVIDENCE)),
        )
        raw.execute("PRAGMA user_version = 4")
    finally:
        raw.close()
    ownership = Ownership.open(state, max_envelopes=1, memory_bytes=256 << 20)
    try:
        replayed = await ownership.lookup("op.old", "sig", root_run=RUN)
    finally:
        ownership.close()
    assert replayed is not None and replayed.evidence == EVIDENCE and replayed.tests is None
    shown = with_tests(replayed).tests
    assert shown == Results(report=None, problem=UNRECORDED_REPORT)


async def test_a_different_request_under_a_known_id_is_a_conflict(ownership: Ownership) -> None:
    """Same operation id, different signature: OPERATION_CONFLICT, before and after it ends."""
    assert isinstance(await _begin(ownership, "op.2", "sig-a"), Began)
    with pytest.raises(JigError) as raised:
        await _begin(ownership, "op.2", "sig-b")
    assert raised.value.code == Code.OPERATION_CONFLICT
    await ownership.finish("op.2", RunResult(evidence=EVIDENCE, report=REPORT), root_run=RUN)
    with pytest.raises(JigError) as again:
        await ownership.lookup("op.2", "sig-b", root_run=RUN)
    assert again.value.code == Code.OPERATION_CONFLICT


async def test_a_recorded_failure_is_raised_again_with_its_details(ownership: Ownership) -> None:
    """A deadline failure with evidence replays as the same code, message and details, and
    says it is recorded (the operation's own outcome, which a session may keep)."""
    assert isinstance(await _begin(ownership, "op.3", "sig"), Began)
    failure = JigError(Code.DEADLINE_EXCEEDED, "deadline", {"command": {"exitCode": None}})
    await ownership.fail("op.3", failure, root_run=RUN)
    with pytest.raises(JigError) as raised:
        await ownership.lookup("op.3", "sig", root_run=RUN)
    assert (raised.value.code, raised.value.message, raised.value.details) == (
        Code.DEADLINE_EXCEEDED,
        "deadline",
        {"command": {"exitCode": None}},
    )
    assert raised.value.recorded


async def test_a_calls_notes_are_replayed_with_its_evidence_and_its_failure(
    ownership: Ownership,
) -> None:
    """The notes an answer carried come back from the journal alone, for a result and for a
    stop, so that a task read back by another server shows them."""
    notes = ("bunfig.toml: Bun runs without it.",)
    assert isinstance(await _begin(ownership, "op.n", "sig"), Began)
    await ownership.finish("op.n", RunResult(EVIDENCE, REPORT, notes=notes), root_run=RUN)
    replayed = await ownership.lookup("op.n", "sig", root_run=RUN)
    assert replayed is not None and replayed.notes == notes
    assert isinstance(await _begin(ownership, "op.s", "sig"), Began)
    stopped = JigError(Code.DEADLINE_EXCEEDED, "deadline")
    stopped.notes = notes
    await ownership.fail("op.s", stopped, root_run=RUN)
    with pytest.raises(JigError) as raised:
        await ownership.lookup("op.s", "sig", root_run=RUN)
    assert raised.value.notes == notes


async def test_an_uncertain_operation_stays_uncertain(ownership: Ownership) -> None:
    """UNCERTAIN is recorded for good: later finishes write nothing, lookups stay UNCERTAIN."""
    assert isinstance(await _begin(ownership, "op.4", "sig"), Began)
    await ownership.fail(
        "op.4", JigError(Code.UNCERTAIN, "cleanup could not be confirmed"), root_run=RUN
    )
    await ownership.finish("op.4", RunResult(evidence=EVIDENCE, report=REPORT), root_run=RUN)
    with pytest.raises(JigError) as raised:
        await ownership.lookup("op.4", "sig", root_run=RUN)
    assert raised.value.code == Code.UNCERTAIN and raised.value.recorded


async def test_slots_are_exhausted_at_once_and_come_back(ownership: Ownership) -> None:
    """With one slot, a second reservation fails RESOURCE_EXHAUSTED; releasing frees it."""
    slot = ownership.reserve("a")
    with pytest.raises(JigError) as raised:
        ownership.reserve("b")
    assert raised.value.code == Code.RESOURCE_EXHAUSTED
    slot.release()
    ownership.reserve("c").release()


async def test_joining_a_row_that_never_closes_ends_at_the_joiners_deadline(
    ownership: Ownership,
) -> None:
    """A join waits only until the joiner's deadline: DEADLINE_EXCEEDED, unrecorded, not forever."""
    assert isinstance(await _begin(ownership, "op.j", "sig"), Began)
    with anyio.fail_after(30), pytest.raises(JigError) as raised:
        await ownership.begin(
            root_run=RUN,
            operation_id="op.j",
            signature="sig",
            context="test",
            deadline=anyio.current_time() + 0.2,
            run_id="opjrun2",
        )
    assert raised.value.code == Code.DEADLINE_EXCEEDED
    assert not raised.value.recorded
    with anyio.fail_after(30), pytest.raises(JigError) as looked:
        await ownership.lookup("op.j", "sig", root_run=RUN, deadline=anyio.current_time())
    assert looked.value.code == Code.DEADLINE_EXCEEDED


async def test_joining_a_row_that_never_closes_is_cancellable(ownership: Ownership) -> None:
    """A cancel of the joining call ends its wait with CANCELLED; the operation is untouched."""
    assert isinstance(await _begin(ownership, "op.k", "sig"), Began)
    cancel = CancelSignal()
    cancel.set()
    with anyio.fail_after(30), pytest.raises(JigError) as raised:
        await ownership.begin(
            root_run=RUN,
            operation_id="op.k",
            signature="sig",
            context="test",
            deadline=anyio.current_time() + 3600,
            run_id="opkrun2",
            cancel=cancel,
        )
    assert raised.value.code == Code.CANCELLED
    row = ownership.journal.get("op.k", root_run=RUN)
    assert row is not None and row.is_open


async def test_the_evidence_is_synced_beside_the_run_and_awaited_by_the_close(
    ownership: Ownership, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The evidence's commit leaves its sync in flight (no fdatasync in this process); the
    close waits for it, then closes the row `done`."""
    require_aio()
    assert isinstance(await _begin(ownership, "op.s", "sig"), Began)
    in_place: list[int] = []
    monkeypatch.setattr(os, "fdatasync", in_place.append)
    recorded = await ownership.record_evidence("op.s", EVIDENCE, root_run=RUN)
    assert recorded is not None and recorded.pending is not None
    await ownership.finish(
        "op.s", RunResult(evidence=EVIDENCE, report=REPORT), root_run=RUN, recorded=recorded
    )
    assert recorded.pending.result == 0
    assert in_place == []
    row = ownership.journal.get("op.s", root_run=RUN)
    assert row is not None and row.state == "done"


async def test_evidence_whose_sync_fails_is_answered_uncertain_and_its_row_stays_open(
    ownership: Ownership, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit landed but the disk failed its sync: nothing says the run's evidence is
    kept, so the answer is UNCERTAIN naming the journal, and the row is not closed."""
    require_aio()
    assert isinstance(await _begin(ownership, "op.f", "sig"), Began)
    failing_syncs(monkeypatch)
    recorded = await ownership.record_evidence("op.f", EVIDENCE, root_run=RUN)
    assert recorded is not None
    with pytest.raises(JigError) as failed:
        await ownership.finish(
            "op.f", RunResult(evidence=EVIDENCE, report=REPORT), root_run=RUN, recorded=recorded
        )
    assert failed.value.code is Code.UNCERTAIN
    assert str(ownership.journal.path) in failed.value.message
    row = ownership.journal.get("op.f", root_run=RUN)
    assert row is not None and row.is_open


async def test_a_lookup_of_a_half_recovered_row_does_not_wait_for_the_pass(
    ownership: Ownership,
) -> None:
    """A row a live pass closed but has not fenced is not final: a lookup (a refused call's
    too, which joins as any call does) is answered within its caller's deadline, never after
    the pass (until 2026-12-07 it waited for the pass without deadline or cancel)."""
    assert isinstance(await _begin(ownership, "op.p", "sig"), Began)
    ownership.journal.mark_uncertain(
        "op.p", root_run=RUN, reason=UNCERTAIN_REASON, cleanup_complete=False, problems=_PENDING
    )
    with recoverylock.held(ownership.journal.path.parent, wait=False) as mine:
        assert mine  # a live pass, as far as the lookup can tell
        with anyio.fail_after(5), pytest.raises(JigError) as left:
            await ownership.lookup("op.p", "sig", root_run=RUN, deadline=time.monotonic() + 0.2)
    assert left.value.code in {Code.DEADLINE_EXCEEDED, Code.UNCERTAIN}
