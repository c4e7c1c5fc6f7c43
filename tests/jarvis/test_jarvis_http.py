"""Raw HTTP against the jarvis app: every auth failure, every error status, Host/Origin, bodies.

The executor is a spy: these tests are about the HTTP surface and about what reaches the
executor, not about containment (see test_jarvis_envelope.py for that).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path

import anyio
import httpx
import pytest

from jigcmd.durable import slotqueue
from jigcmd.envelope.api import EnvelopeFailure, FailureKind
from jigcmd.jarvis.app import MAX_BODY_BYTES
from jigcmd.journal.reservations import Reservations
from tests.jarvis.jarvis_harness import (
    ACTOR,
    TOKEN,
    SpyExecutor,
    auth,
    harness,
    invoke_body,
    make_service,
    until,
)


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="missing"),
        pytest.param(auth("jv_wrong-token-0123456789abcdef"), id="wrong"),
        pytest.param({"Authorization": "Bearer "}, id="empty"),
        pytest.param({"Authorization": "Bearer"}, id="scheme-only"),
        pytest.param({"Authorization": f"Basic {TOKEN}"}, id="basic"),
        pytest.param({"Authorization": TOKEN}, id="no-scheme"),
        pytest.param({"Authorization": f"Bearer {TOKEN}x"}, id="token-prefix"),
    ],
)
async def test_every_authorization_failure_is_a_403_json_error(headers: dict[str, str]) -> None:
    """Missing, wrong, empty and non-Bearer credentials get 403 with a JSON error, nothing runs."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        invoked = await h.invoke("jarvis.run.create", headers=headers, argv=["echo", "hi"])
        manual = await h.client.get("/utcp", headers=headers)
    for response in (invoked, manual):
        assert response.status_code == 403
        assert response.json()["error"].startswith("forbidden")
        assert TOKEN not in response.text
    assert spy.plans == []


async def test_the_bearer_scheme_is_case_insensitive() -> None:
    """`bearer <token>` is the same credential as `Bearer <token>` (RFC 7235)."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.get("/utcp", headers={"Authorization": f"bearer {TOKEN}"})
    assert response.status_code == 200


@pytest.mark.parametrize(
    "host", ["evil.example:7777", "127.0.0.1:8888", "127.0.0.1", "localhost.evil:7777"]
)
async def test_a_foreign_host_header_is_refused_before_anything_else(host: str) -> None:
    """A Host that does not name the bound address (DNS rebinding) gets 421, even with a token."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        response = await h.client.post(
            "/tools/invoke",
            json=invoke_body("jarvis.run.create", argv=["echo"]),
            headers={**auth(), "Host": host},
        )
    assert response.status_code == 421
    assert "error" in response.json()
    assert spy.plans == []


@pytest.mark.parametrize("host", ["127.0.0.1:7777", "localhost:7777", "LOCALHOST:7777"])
async def test_the_bound_address_and_localhost_are_accepted_hosts(host: str) -> None:
    """The bound address and `localhost` with the bound port pass the Host check."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.get("/utcp", headers={**auth(), "Host": host})
    assert response.status_code == 200


@pytest.mark.parametrize("origin", ["http://127.0.0.1:7777", "https://evil.example", "null"])
async def test_any_browser_origin_is_refused(origin: str) -> None:
    """A request carrying an Origin header (a browser page) gets 403, whatever the origin."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        response = await h.client.post(
            "/tools/invoke",
            json=invoke_body("jarvis.run.create", argv=["echo"]),
            headers={**auth(), "Origin": origin},
        )
    assert response.status_code == 403
    assert response.json()["error"] == "browser Origin refused"
    assert spy.plans == []


async def test_an_unknown_path_is_a_404_json_error() -> None:
    """Unknown paths answer 404 with a JSON error body."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.get("/nope", headers=auth())
    assert response.status_code == 404
    assert "error" in response.json()


@pytest.mark.parametrize(("method", "path"), [("GET", "/tools/invoke"), ("POST", "/utcp")])
async def test_a_wrong_method_is_a_405_json_error(method: str, path: str) -> None:
    """The wrong method answers 405 with Allow and a JSON error body."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.request(method, path, headers=auth())
    assert response.status_code == 405
    assert "error" in response.json()
    assert response.headers["allow"]


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
async def test_a_body_that_is_not_declared_json_is_a_415(content_type: str | None) -> None:
    """Only `application/json` bodies are read; anything else is 415."""
    headers = auth()
    if content_type is not None:
        headers["Content-Type"] = content_type
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.post("/tools/invoke", content=b"{}", headers=headers)
    assert response.status_code == 415
    assert "error" in response.json()


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"tool": "jarvis.run.create", "tool": "jarvis.policy.check", "args": {}}',
        b'{"tool": "jarvis.run.create", "args": {"argv": ["echo"], "timeout_ms": NaN}}',
        b"",
    ],
    ids=["garbage", "duplicate-key", "nan", "empty"],
)
async def test_a_body_that_is_not_strict_json_is_a_400(body: bytes) -> None:
    """Invalid, duplicate-key or non-finite JSON is refused with 400 and the reason."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        response = await h.client.post(
            "/tools/invoke",
            content=body,
            headers={**auth(), "Content-Type": "application/json"},
        )
    assert response.status_code == 400
    assert "strict JSON" in response.json()["error"]
    assert spy.plans == []


async def test_an_oversized_declared_body_is_a_413() -> None:
    """A Content-Length above the limit is refused without reading the body."""
    padding = "x" * MAX_BODY_BYTES
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.post(
            "/tools/invoke",
            content=json.dumps({"tool": "jarvis.run.create", "args": {"argv": [padding]}}),
            headers={**auth(), "Content-Type": "application/json"},
        )
    assert response.status_code == 413
    assert "error" in response.json()


async def test_an_oversized_streamed_body_is_a_413() -> None:
    """A chunked body without Content-Length is cut off once it passes the limit."""

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(MAX_BODY_BYTES // 1024 + 2):
            yield b" " * 1024

    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.post(
            "/tools/invoke",
            content=chunks(),
            headers={**auth(), "Content-Type": "application/json"},
        )
    assert response.status_code == 413


async def test_a_body_at_the_limit_is_read() -> None:
    """A body of exactly the limit is accepted (padded with JSON whitespace)."""
    body = json.dumps(invoke_body("jarvis.policy.check", argv=["echo"])).encode()
    body += b" " * (MAX_BODY_BYTES - len(body))
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.post(
            "/tools/invoke", content=body, headers={**auth(), "Content-Type": "application/json"}
        )
    assert response.status_code == 200


async def test_an_unknown_tool_is_a_404_json_error() -> None:
    """A tool name jarvis does not serve answers 404 with the known names."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.invoke("jarvis.shell.exec", argv=["sh"])
    assert response.status_code == 404
    assert "jarvis.run.create" in response.json()["error"]


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"tool": "jarvis.run.create", "args": [], "extra": 1},
        {"tool": 7, "args": {}},
        {"tool": "jarvis.run.create", "args": []},
        {"tool": "jarvis.run.create", "args": {}},
        {"tool": "jarvis.run.create", "args": {"argv": []}},
        {"tool": "jarvis.run.create", "args": {"argv": [1]}},
        {"tool": "jarvis.run.create", "args": {"argv": ["echo\u0000"]}},
        {"tool": "jarvis.run.create", "args": {"argv": ["echo"], "cwd": "tmp"}},
        {"tool": "jarvis.run.create", "args": {"argv": ["echo"], "timeout_ms": 0}},
        {"tool": "jarvis.run.create", "args": {"argv": ["echo"], "timeout_ms": True}},
        {"tool": "jarvis.run.create", "args": {"argv": ["echo"], "shell": True}},
        {"tool": "jarvis.run.get", "args": {"run_id": "1"}},
    ],
)
async def test_malformed_calls_are_a_400_naming_the_field(body: object) -> None:
    """Wrong shapes and invalid arguments answer 400 with a message; nothing runs."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        response = await h.client.post("/tools/invoke", json=body, headers=auth())
    assert response.status_code == 400, response.text
    assert response.json()["error"]
    assert spy.plans == []


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
        (("echo", "two"), "refused: too many active runs")
    ]


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
    assert record.json()["argv"] == ["echo", "hello"]
    assert [r.outcome for r in rows] == [
        f"started run {body['run_id']}",
        f"run {body['run_id']}: exited (exit 0)",
    ]
    assert {r.actor for r in rows} == {ACTOR}


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
