"""A burst of `run.create` through the real UTCP client queues for envelope slots, not 429s.

The server is the real `jigcmd jarvis` child with fewer envelope slots than callers, and the
runs are real envelopes; python-utcp (utcp-http) is the client the issue names.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from jigcmd.journal.store import Journal
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import auth, invoke_body, until
from tests.jarvis.utcp_setup import body, manual_template, utcp_client

pytestmark = pytest.mark.envelope

# A failsafe for a whole burst (never a timing claim).
BURST_S = 120.0


@pytest.fixture
def two_slots(tmp_path: Path) -> Iterator[JarvisChild]:
    """jarvis with two envelope slots of its own state directory."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path, ["--max-envelopes", "2"]) as child:
        yield child


async def test_eight_concurrent_utcp_run_creates_on_two_slots_all_run(
    two_slots: JarvisChild,
) -> None:
    """8 parallel `jarvis.run.create` calls, 2 slots: every one waits its turn and exits 0."""
    client = await utcp_client()
    answers: dict[int, dict[str, Any]] = {}
    try:
        registered = await client.register_manual(manual_template(two_slots.base))
        assert registered.success, registered.errors

        async def one(n: int) -> None:
            answers[n] = await client.call_tool(
                "jarvis.run.create",
                body("jarvis.run.create", argv=["sleep", "0.5"], timeout_ms=10_000),
            )

        with anyio.fail_after(BURST_S):
            async with anyio.create_task_group() as tg:
                for n in range(8):
                    tg.start_soon(one, n)
    finally:
        await client.close()
    assert sorted(answers) == list(range(8))
    assert [(a["status"], a["exit_code"]) for a in answers.values()] == [("exited", 0)] * 8
    assert len({a["run_id"] for a in answers.values()}) == 8


def _running(state_dir: Path) -> int:
    """How many jarvis runs the child's journal records as running."""
    with Journal.open(state_dir) as journal:
        return len(journal.jarvis_running())


async def test_a_slot_that_stays_busy_past_the_queue_wait_is_a_429_with_retry_after(
    tmp_path: Path,
) -> None:
    """One slot held by a run, --queue-wait 1: the next call is 429 naming that bound."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path, ["--max-envelopes", "1", "--queue-wait", "1"]) as jarvis:
        first: list[httpx.Response] = []
        async with (
            httpx.AsyncClient(base_url=jarvis.base, headers=auth(), timeout=BURST_S) as http,
            anyio.create_task_group() as tg,
        ):

            async def hold() -> None:
                first.append(
                    await http.post(
                        "/tools/jarvis.run.create",
                        json=invoke_body("jarvis.run.create", argv=["sleep", "3"]),
                    )
                )

            tg.start_soon(hold)
            await until(lambda: _running(jarvis.state_dir) == 1, within=BURST_S)
            refused = await http.post(
                "/tools/jarvis.run.create", json=invoke_body("jarvis.run.create", argv=["true"])
            )
    assert refused.status_code == 429, refused.text
    assert refused.headers["retry-after"] == "1"
    error = refused.json()["error"]
    assert error.startswith("every envelope slot stayed in use for the 1 s this call may wait")
    assert (first[0].json()["status"], first[0].json()["exit_code"]) == ("exited", 0)
