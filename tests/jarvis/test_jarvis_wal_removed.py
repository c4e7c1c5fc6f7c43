"""A `journal.sqlite3-wal` removed under a running `jigcmd jarvis`: the journal-lost path.

Each call is a 503 naming the removed log and jarvis stops with one line and status 2, as
for a removed state directory; never a 500 "internal error" or a traceback.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from jigcmd.journal.store import Journal
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis

pytestmark = pytest.mark.envelope

# A failsafe, never a timing claim.
ANSWER_S = 60.0
_REMOVED = "the journal's write-ahead log journal.sqlite3-wal was removed or replaced while in use"


def _stop_line(jarvis: JarvisChild) -> str:
    """The one `journal …` line jarvis wrote as it stopped on its own (status 2)."""
    assert jarvis.wait(ANSWER_S) == 2, jarvis.stderr()
    stderr = jarvis.stderr()
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith("jigcmd jarvis: journal ")]
    return line


def test_a_call_after_the_wal_was_removed_is_a_503_and_jarvis_stops(tmp_path: Path) -> None:
    """Not `500 internal error` on every call: the call is told why, and jarvis stops."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path) as jarvis, httpx.Client(timeout=ANSWER_S) as client:
        created = jarvis.call(client, "jarvis.run.create", argv=["true"])
        assert created.status_code == 200, created.text
        (jarvis.state_dir / "journal.sqlite3-wal").unlink()
        answer = jarvis.call(client, "jarvis.run.create", argv=["echo", "after-rm"])
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert error.startswith("journal <state dir>/journal.sqlite3: "), error
        assert _REMOVED in error and error.endswith("; jarvis stops"), error
        line = _stop_line(jarvis)
    assert _REMOVED in line and "; fix: " in line, line
    # Every commit before the removal was kept by the close: the next start reads run 1.
    with Journal.open(jarvis.state_dir) as journal:
        run = journal.jarvis_get(1)
        assert run is not None and run.status == "exited", run
        assert not any("after-rm" in row.outcome for row in journal.audit_rows())


def test_a_wal_removed_mid_run_is_a_503_naming_the_run_not_a_crash(tmp_path: Path) -> None:
    """The run's end cannot be recorded: its caller is told which run, jarvis stops in one line."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path) as jarvis, httpx.Client(timeout=ANSWER_S) as client:
        answers: list[httpx.Response] = []
        caller = threading.Thread(
            target=lambda: answers.append(
                jarvis.call(client, "jarvis.run.create", argv=["sleep", "2"])
            )
        )
        caller.start()
        deadline = time.monotonic() + ANSWER_S
        while not jarvis.run_started():
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.05)
        (jarvis.state_dir / "journal.sqlite3-wal").unlink()
        caller.join(ANSWER_S)
        (answer,) = answers
        assert answer.status_code == 503, answer.text
        assert answer.json()["run_id"] == 1, answer.text
        error = answer.json()["error"]
        assert error.endswith("; run 1 had started, its end is not recorded; jarvis stops")
        assert _REMOVED in error, error
        line = _stop_line(jarvis)
    assert _REMOVED in line, line
