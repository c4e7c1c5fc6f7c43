"""A `run.create` whose caller disconnects while it waits for an envelope slot gets no run.

The real server in-process (uvicorn and the bounded protocol, `live_server`) over a raw
loopback socket; the executor is a spy and the slot is held by "another jigcmd" until the
test lets it go. Bounds are failsafes, never timing claims.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx

from jigcmd.journal.reservations import Reservations
from tests.jarvis.jarvis_harness import (
    TOKEN,
    SpyExecutor,
    auth,
    invoke_body,
    live_server,
    make_service,
    until,
)

_LEFT = "cancelled: the caller left while it waited for an envelope slot; nothing ran"


def _create(port: int, argv: list[str]) -> bytes:
    body = json.dumps(invoke_body("jarvis.run.create", argv=argv)).encode()
    return (
        f"POST /tools/jarvis.run.create HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def test_a_caller_gone_while_waiting_for_a_slot_never_gets_a_run(tmp_path: Path) -> None:
    """Audited `cancelled`, no run row, nothing executed; the slot's next caller runs as run 1."""
    slots = Reservations(tmp_path, 1)
    held = slots.acquire("another jigcmd")
    assert held is not None
    spy = SpyExecutor()
    service = make_service(spy, reservations=slots, queue_wait=60)
    try:
        async with live_server(service) as base:
            port = int(base.rsplit(":", 1)[1])
            async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                await stream.send(_create(port, ["echo", "gone"]))
                await until(lambda: service.waiting_for_slots == 1)
            rows = service.store.audit_rows
            await until(lambda: any(r.outcome == _LEFT for r in rows()))
            assert service.waiting_for_slots == 0
            held.release()
            async with httpx.AsyncClient(base_url=base, headers=auth()) as client:
                after = await client.post(
                    "/tools/jarvis.run.create",
                    json=invoke_body("jarvis.run.create", argv=["echo", "stayed"]),
                )
    finally:
        held.release()
    assert after.status_code == 200, after.text
    assert (after.json()["run_id"], after.json()["status"]) == (1, "exited")
    assert [plan.argv[1:] for plan in spy.plans] == [("stayed",)]
    gone, waited = [r for r in rows() if r.argv == ("echo", "gone")]
    assert (gone.decision, gone.outcome) == ("allow", _LEFT)
    assert waited.decision == "allow"
    assert waited.outcome.startswith("waiting: for an envelope slot, 0 call(s) ahead"), waited
