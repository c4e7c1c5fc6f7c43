"""Every refusal reaches the audit: an authenticated call's own row, the rest counted.

The executor is a spy; what is looked at is the journal's audit rows after each refusal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from jigcmd.jarvis.refusals import UNAUTHENTICATED
from jigcmd.journal.reservations import Reservations
from jigcmd.journal.toolruns import AuditRow
from tests.jarvis.jarvis_harness import (
    ACTOR,
    TOKEN,
    SpyExecutor,
    auth,
    harness,
    invoke_body,
    live_server,
    make_service,
    until,
)

# So long that within a test no second row of unauthenticated refusals falls due.
NEVER_S = 3600.0


def shape(row: AuditRow) -> tuple[Any, ...]:
    return (row.actor, row.tool, row.argv, row.decision, row.outcome)


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        pytest.param(
            "/tools/jarvis.shell.exec",
            invoke_body("jarvis.shell.exec", argv=["sh"]),
            ("jarvis.shell.exec", (), "invalid", "refused: unknown tool 'jarvis.shell.exec'"),
            id="unknown-tool-404",
        ),
        pytest.param(
            "/tools/jarvis.run.create",
            invoke_body("jarvis.run.create", argv=["bash", "-c", "id"], extra=1),
            ("jarvis.run.create", ("bash", "-c", "id"), "invalid", "refused: args: unknown"),
            id="unknown-argument-400",
        ),
        pytest.param(
            "/tools/jarvis.run.create",
            invoke_body("jarvis.run.create", argv=["bash", "-c", "id\x00"]),
            (
                "jarvis.run.create",
                ("bash", "-c", "id\x00"),
                "invalid",
                "refused: args.argv[2] may not contain NUL",
            ),
            id="nul-400",
        ),
        pytest.param(
            "/tools/jarvis.run.get",
            invoke_body("jarvis.run.create", argv=["echo", "smuggled"]),
            ("jarvis.run.get", ("echo", "smuggled"), "invalid", "refused: the body names tool"),
            id="another-tools-body-400",
        ),
        pytest.param(
            "/tools/jarvis.run.get",
            invoke_body("jarvis.run.get", run_id=99),
            ("jarvis.run.get", (), "invalid", "refused: no run with run_id 99"),
            id="no-such-run-404",
        ),
        pytest.param(
            "/tools/invoke",
            invoke_body("jarvis.run.create", argv=["echo"]),
            ("/tools/invoke", (), "invalid", "refused: POST /tools/invoke is retired"),
            id="retired-url-410",
        ),
    ],
)
async def test_each_refused_call_is_audited_once_with_the_argv_it_sent(
    path: str, body: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    """404, 400 and 410 refusals of an authenticated call: one row, its actor and its argv."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.post(path, json=body, headers=auth())
        rows = h.store.audit_rows(10)
    assert response.status_code in (400, 404, 410)
    (row,) = rows
    tool, argv, decision, outcome = expected
    assert (row.actor, row.tool, row.argv, row.decision) == (ACTOR, tool, argv, decision)
    assert row.outcome.startswith(outcome), row.outcome


async def test_a_body_that_is_not_json_is_audited_as_refused() -> None:
    """A 400 for the body itself (no argv to tell) is one row all the same."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.post(
            "/tools/jarvis.run.create",
            content=b"not json",
            headers={**auth(), "Content-Type": "application/json"},
        )
        rows = h.store.audit_rows(10)
    assert response.status_code == 400
    assert [(r.actor, r.argv, r.decision) for r in rows] == [(ACTOR, (), "invalid")]
    assert rows[0].outcome.startswith("refused: request body is not strict JSON")


async def test_a_capability_denial_is_audited_with_the_argv_it_sent() -> None:
    """run:create without the grant: the row says forbidden and names the argv."""
    async with harness(make_service(SpyExecutor()), capabilities="policy:check") as h:
        response = await h.invoke("jarvis.run.create", argv=["echo", "hi"], cwd="/srv")
        rows = h.store.audit_rows(10)
    assert response.status_code == 403
    assert [shape(r) for r in rows] == [
        (
            ACTOR,
            "jarvis.run.create",
            ("echo", "hi"),
            "forbidden",
            "refused: capability denied: jarvis.run.create needs run:create",
        )
    ]
    assert rows[0].cwd == "/srv"


async def test_a_call_refused_503_as_the_server_stops_is_audited_with_its_allow(
    tmp_path: Path,
) -> None:
    """An allowed call waiting for a slot when the server stops: 503, and a row saying so
    after the one written as its wait began."""
    slots = Reservations(tmp_path, 1)
    held = slots.acquire("another jigcmd")
    assert held is not None
    service = make_service(SpyExecutor(), reservations=slots, queue_wait=60)
    answers: list[httpx.Response] = []
    try:
        async with harness(service) as h, anyio.create_task_group() as tg:

            async def call() -> None:
                answers.append(await h.invoke("jarvis.run.create", argv=["echo", "late"]))

            tg.start_soon(call)
            await until(lambda: service.waiting_for_slots == 1)
            service.stop()
    finally:
        held.release()
    assert answers[0].status_code == 503
    row, waited = service.store.audit_rows(10)
    assert shape(row) == (
        ACTOR,
        "jarvis.run.create",
        ("echo", "late"),
        "allow",
        "refused: jarvis is shutting down; nothing ran",
    )
    # Its decision was audited as its wait began, before anything else could happen.
    assert shape(waited)[:4] == shape(row)[:4]
    assert waited.outcome.startswith("waiting: for an envelope slot, 0 call(s) ahead (executes ")


async def test_requests_without_the_token_are_counted_in_one_row_per_interval() -> None:
    """The first is written at once; a burst after it waits for the next row, or the stop."""
    service = make_service(SpyExecutor(), unauthenticated_row_s=NEVER_S)
    wrong = auth("jv_wrong-token-0123456789abcdef")
    missing: dict[str, str] = {}
    async with harness(service) as h:
        await h.invoke("jarvis.run.create", headers=wrong, argv=["echo"])
        await until(lambda: len(h.store.audit_rows(10)) == 1)
        for headers in (wrong, missing, wrong, missing, wrong):
            refused = await h.invoke("jarvis.run.create", headers=headers, argv=["echo"])
            assert refused.status_code == 403
        await h.client.get("/utcp", headers={**auth(), "Origin": "https://evil.example"})
        during = len(h.store.audit_rows(10))
    rows = list(reversed(service.store.audit_rows(10)))
    assert during == 1
    assert [(r.actor, r.tool, r.argv, r.decision) for r in rows] == [
        (UNAUTHENTICATED, "", (), "forbidden")
    ] * 2
    assert [r.outcome for r in rows] == [
        "refused 1 request before authentication: wrong Bearer token (1)",
        "refused 6 requests before authentication: wrong Bearer token (3); "
        "missing Authorization header (2); browser Origin refused (1)",
    ]
    assert TOKEN not in repr(rows)


async def test_a_wrong_token_refused_by_the_connection_is_counted_too() -> None:
    """Through the real server the token is checked before the app: still counted."""
    service = make_service(SpyExecutor())
    async with live_server(service) as base, httpx.AsyncClient(base_url=base) as client:
        refused = await client.post(
            "/tools/jarvis.run.create",
            json=invoke_body("jarvis.run.create", argv=["echo"]),
            headers=auth("not-the-token"),
        )
        await until(lambda: len(service.store.audit_rows(10)) == 1)
    assert refused.status_code == 403
    (row,) = service.store.audit_rows(10)
    assert (row.actor, row.outcome) == (
        UNAUTHENTICATED,
        "refused 1 request before authentication: wrong Bearer token (1)",
    )


@pytest.mark.parametrize(
    ("headers", "status", "decision", "outcome"),
    [
        pytest.param(
            {"Host": "evil.example:7777"},
            421,
            "invalid",
            "refused: Host header does not name this server",
            id="foreign-host-421",
        ),
        pytest.param(
            {"Origin": "https://evil.example"},
            403,
            "forbidden",
            "refused: browser Origin refused",
            id="browser-origin-403",
        ),
    ],
)
async def test_a_host_or_origin_refusal_of_a_call_with_the_token_is_audited_as_its_actors(
    headers: dict[str, str], status: int, decision: str, outcome: str
) -> None:
    """Through the real server the token passed before the guard: one row of the actor, the
    tool its URL named, and nothing counted as unauthenticated."""
    service = make_service(SpyExecutor())
    async with live_server(service) as base, httpx.AsyncClient(base_url=base) as client:
        refused = await client.post(
            "/tools/jarvis.run.create",
            json=invoke_body("jarvis.run.create", argv=["echo"]),
            headers={**auth(), **headers},
        )
    assert refused.status_code == status
    rows = service.store.audit_rows(10)
    assert [shape(r) for r in rows] == [(ACTOR, "jarvis.run.create", (), decision, outcome)]
    assert service.store.jarvis_get(1) is None


async def test_a_foreign_host_without_the_token_is_only_counted() -> None:
    """The application served alone (no connection checked a token): the refusal is anonymous,
    counted like any request refused before it authenticated."""
    service = make_service(SpyExecutor())
    async with harness(service) as h:
        refused = await h.client.post(
            "/tools/jarvis.run.create",
            json=invoke_body("jarvis.run.create", argv=["echo"]),
            headers={"Host": "evil.example:7777"},
        )
    assert refused.status_code == 421
    (row,) = service.store.audit_rows(10)
    assert shape(row) == (
        UNAUTHENTICATED,
        "",
        (),
        "forbidden",
        "refused 1 request before authentication: Host header does not name this server (1)",
    )
