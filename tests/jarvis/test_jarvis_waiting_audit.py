"""An allowed `run.create` waiting for an envelope slot is audited as its wait begins.

"Every decision and every refusal is audited": a jarvis killed (-9) while a call waits
leaves that call's `allow` in the journal (`waiting: …`), though nothing ran for it and its
caller got no answer.
"""

from __future__ import annotations

import contextlib
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from jigcmd.journal.store import Journal
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import auth, invoke_body

pytestmark = pytest.mark.envelope

# Failsafes, never timing claims: how long to look for a row, and for a call to answer.
_LOOK_S = 15.0
_CALL_S = 90.0
_MARK = "QUEUED-WHEN-KILLED"
# The slot's holder may outlast the wait's longest bound (the early answer at 25 s): the
# waiting call is still waiting when jarvis is killed, whatever the row did.
_POLICY = """
search_path = ["/usr/bin", "/bin"]
timeout_ms_ceiling = 60000

[[rule]]
name = "echo"
decision = "allow"
argv0 = ["echo", "sleep"]
timeout_ms_max = 60000
"""


def _rows(jarvis: JarvisChild, argv: tuple[str, ...]) -> list[tuple[str, str]]:
    """(decision, outcome) of the audit rows of `argv`, oldest first (read-only)."""
    with Journal.open_read_only(jarvis.state_dir) as journal:
        rows = journal.audit_rows(1000)
    return [(row.decision, row.outcome) for row in reversed(rows) if row.argv == argv]


def _look(jarvis: JarvisChild, argv: tuple[str, ...]) -> None:
    """Return once `argv` has an audit row, or after `_LOOK_S` (the assertion comes later)."""
    deadline = time.monotonic() + _LOOK_S
    while not _rows(jarvis, argv) and time.monotonic() < deadline:
        time.sleep(0.05)


def _create(jarvis: JarvisChild, argv: list[str], timeout_ms: int) -> None:
    """One `run.create`; killed jarvis answers nothing, which is what this test expects."""
    body = invoke_body("jarvis.run.create", argv=argv, timeout_ms=timeout_ms)
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(
            f"{jarvis.base}/tools/jarvis.run.create", json=body, headers=auth(), timeout=_CALL_S
        )


def test_a_call_waiting_for_a_slot_when_jarvis_is_killed_leaves_its_decision_audited(
    tmp_path: Path,
) -> None:
    """One slot held by `sleep 60`; `echo` waits; kill -9: the echo's `allow` is in the audit."""
    machine_runs_jarvis()
    queued = ("echo", _MARK)
    with (
        JarvisChild(tmp_path, ["--max-envelopes", "1"], policy=_POLICY) as jarvis,
        ThreadPoolExecutor(2) as calls,
    ):
        calls.submit(_create, jarvis, ["sleep", "60"], 60_000)
        _look(jarvis, ("sleep", "60"))
        assert _rows(jarvis, ("sleep", "60"))[0][1].startswith("started run 1 "), jarvis.stderr()
        calls.submit(_create, jarvis, list(queued), 60_000)
        _look(jarvis, queued)
        jarvis.signal(signal.SIGKILL)
        jarvis.wait()
    found = _rows(jarvis, queued)
    # Started again on the same state directory: its start-up recovery sweeps what the killed
    # one left (the sleep's envelope), and the row is still there, the only one of the call.
    with JarvisChild(tmp_path, policy=_POLICY) as again:
        again.signal(signal.SIGTERM)
        assert again.wait() == 0, again.stderr()
    assert _rows(again, queued) == found
    assert [decision for decision, _ in found] == ["allow"], jarvis.stderr()
    (outcome,) = [outcome for _, outcome in found]
    assert outcome.startswith("waiting: for an envelope slot, 0 call(s) ahead (executes /"), outcome
