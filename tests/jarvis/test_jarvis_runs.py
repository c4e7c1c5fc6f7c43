"""Jarvis calls that reach its service, over raw HTTP: grants, capacity, slots, runs, audit.

The executor is a spy: these tests are about what reaches the executor and what the journal
and the audit keep, not about containment (see test_jarvis_envelope.py for that); the HTTP
boundary itself (auth, Host/Origin, statuses, bodies) is test_jarvis_http.py.
"""

from __future__ import annotations

import logging
import os
from functools import partial
from pathlib import Path

import anyio
import httpx
import pytest

from jigcmd.durable import slotqueue
from jigcmd.envelope.api import EnvelopeFailure, FailureKind
from jigcmd.journal.reservations import Reservations
from jigcmd.journal.store import Journal
from tests.jarvis.jarvis_harness import (
    ACTOR,
    POLICY,
    TOKEN,
    TRUE,
    AuditFailsOnce,
    SpyExecutor,
    auth,
    harness,
    linked_true,
    make_service,
    until,
)

# The file the policy resolves `echo` to, which the plan executes.
ECHO = os.path.realpath("/usr/bin/echo")


async def test_a_missing_grant_is_a_403_with_reason_capability_denied() -> None:
    """With only policy:check granted, run:create is refused as `capability denied` and audited."""
    spy = SpyExecutor()
    async with harness(make_service(spy), capabilities="policy:check") as h:
        refused = await h.invoke("jarvis.run.create", argv=["echo", "hi"])
        checked = await h.invoke("jarvis.policy.check", argv=["echo", "hi"])
        rows = h.store.audit_rows(10)
    assert refused.status_code == 403
    assert refused.json()["reason"] == "capability denied"
    assert "run:create" in refused.json()["error"]
    assert checked.status_code == 200
    assert spy.plans == []
    assert [(r.tool, r.decision) for r in rows] == [
        ("jarvis.policy.check", "allow"),
        ("jarvis.run.create", "forbidden"),
    ]


async def test_an_unknown_run_id_is_a_404() -> None:
    """`jarvis.run.get` for a run that does not exist answers 404."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.invoke("jarvis.run.get", run_id=99)
    assert response.status_code == 404
    assert "99" in response.json()["error"]


async def test_too_many_active_runs_is_a_429() -> None:
    """When every run slot is busy, a further allowed run is refused with 429 and not started."""
    gate = anyio.Event()
    spy = SpyExecutor(gate)
    service = make_service(spy, early_answer_seconds=0, max_active_runs=1)
    async with harness(service) as h:
        first = await h.invoke("jarvis.run.create", argv=["echo", "one"])
        second = await h.invoke("jarvis.run.create", argv=["echo", "two"])
        gate.set()
        await service.wait_run(first.json()["run_id"])
    assert first.json()["status"] == "running"
    assert second.status_code == 429
    assert second.headers["retry-after"] == "1"
    assert "error" in second.json()
    assert len(spy.plans) == 1
    refusals = [r for r in service.store.audit_rows(10) if r.outcome.startswith("refused")]
    assert [(r.argv, r.outcome) for r in refusals] == [
        (("echo", "two"), "refused: too many active runs (at most 1)")
    ]


async def test_a_burst_past_the_active_run_cap_runs_only_the_cap_and_refuses_the_rest() -> None:
    """Five calls at once with room for two: two run, three are 429 before any run ends."""
    gate = anyio.Event()
    spy = SpyExecutor(gate)
    service = make_service(spy, max_active_runs=2)
    answers: list[httpx.Response] = []
    async with harness(service) as h:

        async def call(n: int) -> None:
            answers.append(await h.invoke("jarvis.run.create", argv=["echo", str(n)]))

        async with anyio.create_task_group() as tg:
            for n in range(5):
                tg.start_soon(call, n)
            await until(lambda: len(answers) == 3 and spy.entered == 2)
            gate.set()
    statuses = sorted(response.status_code for response in answers)
    assert statuses == [200, 200, 429, 429, 429]
    assert len(spy.plans) == 2
    refused = [r for r in answers if r.status_code == 429]
    assert {r.json()["error"] for r in refused} == {"too many active runs (at most 2)"}


async def test_every_envelope_slot_in_use_is_a_429_with_retry_after_and_is_audited(
    tmp_path: Path,
) -> None:
    """Every slot stays in use for the queue wait: 429, Retry-After, the refusal audited."""
    slots = Reservations(tmp_path, 1)
    held = slots.acquire("another jigcmd")
    assert held is not None
    spy = SpyExecutor(anyio.Event())
    service = make_service(spy, reservations=slots, queue_wait=0.2)
    try:
        async with harness(service) as h:
            refused = await h.invoke("jarvis.run.create", argv=["echo", "full"])
    finally:
        held.release()
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    message = refused.json()["error"]
    assert message.startswith("every envelope slot stayed in use for the 0.2 s this call may wait")
    assert "all 1 envelope slots are in use" in message
    assert message.endswith("; nothing ran")
    assert spy.plans == []
    (row,) = [r for r in service.store.audit_rows(10) if r.outcome.startswith("refused")]
    assert row.argv == ("echo", "full")
    assert row.outcome == f"refused: {message}"


async def test_a_run_create_waits_for_a_slot_this_process_frees_and_then_runs(
    tmp_path: Path,
) -> None:
    """One slot, two calls: the second waits for the first's slot instead of a 429."""
    gate = anyio.Event()
    spy = SpyExecutor(gate)
    service = make_service(spy, reservations=Reservations(tmp_path, 1))
    async with harness(service) as h:
        answers: dict[str, httpx.Response] = {}

        async def call(word: str) -> None:
            answers[word] = await h.invoke("jarvis.run.create", argv=["echo", word])

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "first")
            await until(lambda: spy.entered == 1)
            tg.start_soon(call, "second")
            await until(lambda: service.waiting_for_slots == 1)
            gate.set()
    assert [answers[w].status_code for w in ("first", "second")] == [200, 200]
    assert [answers[w].json()["status"] for w in ("first", "second")] == ["exited"] * 2
    assert [plan.argv[1:] for plan in spy.plans] == [("first",), ("second",)]


async def test_the_wait_for_a_slot_is_bounded_by_the_runs_own_timeout(tmp_path: Path) -> None:
    """timeout_ms 300 under a 60 s queue wait: refused after 0.3 s, naming that bound."""
    slots = Reservations(tmp_path, 1)
    held = slots.acquire("another jigcmd")
    assert held is not None
    service = make_service(SpyExecutor(), reservations=slots, queue_wait=60)
    try:
        async with harness(service) as h:
            refused = await h.invoke("jarvis.run.create", argv=["echo", "x"], timeout_ms=300)
    finally:
        held.release()
    assert refused.status_code == 429
    assert "for the 0.3 s this call may wait" in refused.json()["error"]


async def test_a_call_without_its_own_timeout_waits_the_whole_queue_wait(tmp_path: Path) -> None:
    """No timeout_ms: the rule's 100 ms cap does not shorten the 0.3 s queue wait."""
    slots = Reservations(tmp_path, 1)
    held = slots.acquire("another jigcmd")
    assert held is not None
    policy = POLICY + "timeout_ms_max = 100\n"
    service = make_service(SpyExecutor(), policy=policy, reservations=slots, queue_wait=0.3)
    try:
        async with harness(service) as h:
            refused = await h.invoke("jarvis.run.create", argv=["echo", "x"])
    finally:
        held.release()
    assert refused.status_code == 429
    assert "for the 0.3 s this call may wait" in refused.json()["error"]


async def test_a_full_queue_of_waiting_calls_is_a_429_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the queue's bound (`MAX_WAITING` waiting already) the call is refused, not queued."""
    monkeypatch.setattr(slotqueue, "MAX_WAITING", 1)
    slots = Reservations(tmp_path, 1)
    held = slots.acquire("another jigcmd")
    assert held is not None
    service = make_service(SpyExecutor(), reservations=slots, queue_wait=30)
    try:
        async with harness(service) as h, anyio.create_task_group() as tg:
            tg.start_soon(partial(h.invoke, "jarvis.run.create", argv=["echo", "waits"]))
            await until(lambda: service.waiting_for_slots == 1)
            refused = await h.invoke("jarvis.run.create", argv=["echo", "x"])
            held.release()
    finally:
        held.release()  # idempotent
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"].endswith("1 calls are waiting already")


async def test_a_long_run_answers_early_as_running_and_can_be_polled() -> None:
    """A run still going at the early-answer bound returns `running`; run.get shows its end."""
    gate = anyio.Event()
    service = make_service(SpyExecutor(gate), early_answer_seconds=0)
    async with harness(service) as h:
        early = await h.invoke("jarvis.run.create", argv=["echo", "slow"])
        run_id = early.json()["run_id"]
        during = await h.invoke("jarvis.run.get", run_id=run_id)
        gate.set()
        await service.wait_run(run_id)
        after = await h.invoke("jarvis.run.get", run_id=run_id)
    assert (early.json()["status"], early.json()["decision"]) == ("running", "allow")
    assert during.json()["status"] == "running"
    assert after.json()["status"] == "exited"
    assert after.json()["exit_code"] == 0
    assert after.json()["stdout"] == {"text": "slow\n", "truncated": False}


async def test_a_denied_run_reaches_neither_planner_nor_executor() -> None:
    """A denied argv returns decision deny, run_id null, and the executor is never called."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        by_rule = await h.invoke("jarvis.run.create", argv=["echo", "forbidden"])
        by_default = await h.invoke("jarvis.run.create", argv=["rm", "-rf", "/"])
        rows = h.store.audit_rows(10)
    assert by_rule.json() == {
        "decision": "deny",
        "reason": "denied by rule 'no-forbidden'",
        "matched_rule": "no-forbidden",
        "run_id": None,
        "status": "denied",
        "exit_code": None,
    }
    assert by_default.json()["matched_rule"] is None
    assert spy.plans == []
    assert spy.entered == 0
    assert all(r.decision == "deny" and r.actor == ACTOR for r in rows)


async def test_an_allowed_run_is_executed_once_recorded_and_audited() -> None:
    """An allowed argv runs exactly once; the result, the record and two audit rows agree."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        response = await h.invoke("jarvis.run.create", argv=["echo", "hello"])
        body = response.json()
        record = await h.invoke("jarvis.run.get", run_id=body["run_id"])
        rows = list(reversed(h.store.audit_rows(10)))
    assert body["decision"] == "allow"
    assert body["matched_rule"] == "echo"
    assert (body["status"], body["exit_code"]) == ("exited", 0)
    assert isinstance(body["run_id"], int)
    assert [p.argv for p in spy.plans] == [("/usr/bin/echo", "hello")]
    assert [p.program for p in spy.plans] == [ECHO]
    assert record.json()["argv"] == ["echo", "hello"]
    assert [r.outcome for r in rows] == [
        f"started run {body['run_id']} (executes {ECHO})",
        f"run {body['run_id']}: exited (exit 0)",
    ]
    assert {r.actor for r in rows} == {ACTOR}


async def test_run_create_and_run_get_name_the_file_a_symlinked_program_executes(
    tmp_path: Path,
) -> None:
    """Called through a link, the run executes its target; both answers name the target."""
    link, cwd, policy = linked_true(tmp_path)
    spy = SpyExecutor()
    async with harness(make_service(spy, policy=policy)) as h:
        created = (await h.invoke("jarvis.run.create", argv=[link], cwd=cwd)).json()
        got = (await h.invoke("jarvis.run.get", run_id=created["run_id"])).json()
    assert [(p.argv, p.program) for p in spy.plans] == [((link,), TRUE)]
    assert created["executable"] == got["executable"] == TRUE
    assert (got["argv"], got["cwd"]) == ([link], cwd)


@pytest.mark.parametrize(
    ("failure", "status", "detail"),
    [
        pytest.param(
            EnvelopeFailure(FailureKind.SETUP_FAILED, "cpu pin", "Invalid argument"),
            "failed",
            "EXECUTION_FAILED: containment envelope incomplete, nothing ran: cpu pin: "
            "Invalid argument",
            id="setup-failed",
        ),
        pytest.param(
            EnvelopeFailure(FailureKind.ZYGOTE_UNREACHABLE, "launch", "Broken pipe"),
            "failed",
            "EXECUTION_FAILED: envelope zygote unreachable: Broken pipe",
            id="zygote-unreachable",
        ),
        pytest.param(
            EnvelopeFailure(
                FailureKind.SETUP_FAILED,
                "mounts",
                "No space left on device",
                cleaned_up=False,
                cleanup_problems=("cgroup jigcmd-x still populated",),
            ),
            "uncertain",
            "UNCERTAIN: containment envelope incomplete, nothing ran: mounts: No space left on "
            "device; cleanup not confirmed: cgroup jigcmd-x still populated",
            id="setup-failed-cleanup-unproved",
        ),
        pytest.param(
            EnvelopeFailure(FailureKind.DEADLINE_BEFORE_START, "deadline", "too late"),
            "failed",
            "DEADLINE_EXCEEDED: the deadline passed before the candidate started; nothing ran",
            id="deadline-before-start",
        ),
        pytest.param(
            EnvelopeFailure(FailureKind.INIT_LOST, "init lost", "pid 1 of the envelope died"),
            "uncertain",
            "UNCERTAIN: pid 1 of the envelope died; the envelope was cleaned up",
            id="init-lost",
        ),
        pytest.param(
            EnvelopeFailure(FailureKind.REPORTS_STOPPED, "reports", cleaned_up=False),
            "uncertain",
            "UNCERTAIN: the envelope supervisor stopped reporting; the run's end and cleanup "
            "are unproved",
            id="reports-stopped",
        ),
    ],
)
async def test_an_envelope_failure_is_recorded_as_failed_only_when_nothing_ran_or_remains(
    failure: EnvelopeFailure, status: str, detail: str
) -> None:
    """Jarvis chooses the run's status from what the envelope says happened; the words follow."""
    async with harness(make_service(SpyExecutor(failure=failure))) as h:
        response = await h.invoke("jarvis.run.create", argv=["echo", "hello"])
        record = await h.invoke("jarvis.run.get", run_id=response.json()["run_id"])
    assert response.json()["status"] == status
    assert record.json()["status"] == status
    assert record.json()["detail"] == detail


async def test_a_runs_detail_is_answered_by_the_next_server_on_the_same_journal(
    tmp_path: Path,
) -> None:
    """Why a run failed is kept with it: `run.get` after a restart still says it."""
    failure = EnvelopeFailure(FailureKind.SETUP_FAILED, "cpu pin", "Invalid argument")
    with Journal.open(tmp_path) as store:
        async with harness(make_service(SpyExecutor(failure=failure), store=store)) as h:
            created = (await h.invoke("jarvis.run.create", argv=["echo", "x"])).json()
    with Journal.open(tmp_path) as store:
        async with harness(make_service(SpyExecutor(), store=store)) as h:
            fetched = (await h.invoke("jarvis.run.get", run_id=created["run_id"])).json()
    assert created["detail"].startswith("EXECUTION_FAILED: containment envelope incomplete")
    assert (fetched["status"], fetched["detail"]) == ("failed", created["detail"])


async def test_a_run_whose_start_cannot_be_audited_is_closed_failed_and_not_uncertain_later(
    tmp_path: Path,
) -> None:
    """Its row was begun, its "started run" row failed: closed `failed`, nothing ran; the slot
    of a cap of one is free again, and the next server on the journal leaves the row be."""
    executor = SpyExecutor()
    with AuditFailsOnce.open(tmp_path) as store:
        service = make_service(executor, store=store, max_active_runs=1)
        async with service.running():
            with pytest.raises(OSError, match="AuditFailsOnce"):
                await service.create(ACTOR, "jarvis.run.create", {"argv": ["echo", "lost"]})
            unstarted = store.jarvis_get(1)
            after = await service.create(ACTOR, "jarvis.run.create", {"argv": ["echo", "next"]})
    with Journal.open(tmp_path) as store:
        async with harness(make_service(SpyExecutor(), store=store)) as h:
            fetched = (await h.invoke("jarvis.run.get", run_id=1)).json()
    assert unstarted is not None
    assert (unstarted.status, unstarted.detail) == (
        "failed",
        "not started: its start could not be audited; nothing ran",
    )
    assert (fetched["status"], fetched["detail"]) == (unstarted.status, unstarted.detail)
    assert (after["run_id"], after["status"]) == (2, "exited")
    assert [plan.argv[1:] for plan in executor.plans] == [("next",)]


async def test_policy_check_decides_without_running_anything() -> None:
    """`jarvis.policy.check` returns the decision for an allowed argv and starts nothing."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        response = await h.invoke("jarvis.policy.check", argv=["echo", "hi"])
    assert response.json() == {
        "decision": "allow",
        "reason": "allowed by rule 'echo'",
        "matched_rule": "echo",
    }
    assert spy.plans == []


async def test_the_token_never_appears_in_responses_audit_or_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Across successes and failures the raw token is absent from bodies, audit rows and logs."""
    caplog.set_level(logging.DEBUG)
    async with harness(make_service(SpyExecutor()), capabilities="run:create") as h:
        texts = [
            (await h.client.get("/utcp", headers=auth())).text,
            (await h.invoke("jarvis.run.create", argv=["echo", "x"])).text,
            (await h.invoke("jarvis.run.create", argv=["rm"])).text,
            (await h.invoke("jarvis.policy.check", argv=["echo"])).text,
            (await h.invoke("jarvis.run.create", headers=auth(TOKEN + "x"), argv=["echo"])).text,
        ]
        rows = h.store.audit_rows(100)
    haystack = "\n".join([*texts, *(repr(r) for r in rows), caplog.text])
    assert TOKEN not in haystack
    assert TOKEN[3:] not in haystack
    assert ACTOR in haystack
