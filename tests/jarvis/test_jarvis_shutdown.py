"""`jigcmd jarvis` stops gracefully on SIGTERM, SIGINT and SIGHUP: runs fenced, recorded, exit 0."""

from __future__ import annotations

import shutil
import signal
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest

from jigcmd.journal.store import Journal
from jigcmd.server.stopsignals import STOP_SIGNALS
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import auth, invoke_body, until

pytestmark = pytest.mark.envelope

# Failsafes (never timing claims): the graceful drain takes at most 15 s.
ANSWER_S = 60.0


def _running(state_dir: Path) -> int:
    with Journal.open(state_dir) as journal:
        return len(journal.jarvis_running())


@pytest.mark.parametrize("signum", STOP_SIGNALS, ids=lambda signum: signum.name)
def test_an_idle_jarvis_exits_0_on_a_stop_signal(tmp_path: Path, signum: int) -> None:
    """No traceback, no re-raised signal: status 0."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path) as jarvis:
        jarvis.signal(signum)
        assert jarvis.wait(ANSWER_S) == 0, jarvis.stderr()
        assert "Traceback" not in jarvis.stderr()


@pytest.mark.parametrize("signum", STOP_SIGNALS, ids=lambda signum: signum.name)
async def test_a_stop_signal_mid_run_fences_the_run_records_it_and_exits_0(
    tmp_path: Path, signum: int
) -> None:
    """A `sleep 60` in flight: fenced at once, answered and recorded `failed`, then exit 0."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path) as jarvis:
        answers: list[httpx.Response | BaseException] = []
        async with httpx.AsyncClient(base_url=jarvis.base, timeout=ANSWER_S) as http:

            async def call() -> None:
                try:
                    answers.append(
                        await http.post(
                            "/tools/jarvis.run.create",
                            json=invoke_body("jarvis.run.create", argv=["sleep", "60"]),
                            headers=auth(),
                        )
                    )
                except httpx.HTTPError as exc:
                    answers.append(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await until(lambda: _running(jarvis.state_dir) == 1, within=ANSWER_S)
                jarvis.signal(signum)
        status = await anyio.to_thread.run_sync(jarvis.wait, ANSWER_S)
        assert status == 0, jarvis.stderr()
        assert "Traceback" not in jarvis.stderr()
        (answer,) = answers
        assert isinstance(answer, httpx.Response), answer
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "failed"
        assert answer.json()["detail"] == "cancelled: the server shut down"
        with Journal.open(jarvis.state_dir) as journal:
            assert journal.jarvis_running() == []
            (run,) = [journal.jarvis_get(n) for n in (1,)]
        assert run is not None
        assert run.status == "failed", run
        assert run.detail == "cancelled: the server shut down"


def _remove_while_written(state_dir: Path) -> None:
    """`rm -rf` until it holds: jarvis's zygote may still be staging its runtime into it."""
    for _ in range(1000):
        shutil.rmtree(state_dir, ignore_errors=True)
        if not state_dir.exists():
            return
    raise AssertionError(f"{state_dir} kept being written: {sorted(state_dir.rglob('*'))}")


def test_a_state_dir_removed_under_jarvis_ends_in_one_line_and_exit_2(tmp_path: Path) -> None:
    """SIGTERM after rm -rf of the state directory: one `journal …; fix: …` line, status 2."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path) as jarvis:
        _remove_while_written(jarvis.state_dir)
        jarvis.signal(signal.SIGTERM)
        assert jarvis.wait(ANSWER_S) == 2, jarvis.stderr()
        stderr = jarvis.stderr()
    assert "Traceback" not in stderr, stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith("jigcmd jarvis: journal ")]
    assert "the journal file was removed while in use" in line, line
    assert "; fix: leave " in line, line


def test_a_call_after_the_state_dir_was_removed_is_a_503_and_jarvis_stops_with_exit_2(
    tmp_path: Path,
) -> None:
    """Fail closed: no answer from the deleted journal; the call is told why, jarvis stops."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path) as jarvis, httpx.Client(timeout=ANSWER_S) as client:
        created = jarvis.call(client, "jarvis.run.create", argv=["true"])
        assert created.status_code == 200, created.text
        _remove_while_written(jarvis.state_dir)
        answer = jarvis.call(client, "jarvis.run.get", run_id=created.json()["run_id"])
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert error.startswith("journal <state dir>/journal.sqlite3: "), error
        assert "the journal file was removed while in use" in error, error
        assert error.endswith("; jarvis stops"), error
        assert str(jarvis.state_dir) not in error
        # It stops on its own, no signal sent.
        assert jarvis.wait(ANSWER_S) == 2, jarvis.stderr()
        stderr = jarvis.stderr()
    assert "Traceback" not in stderr, stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith("jigcmd jarvis: journal ")]
    assert "the journal file was removed while in use" in line, line
    assert "; fix: leave " in line, line


def test_a_state_dir_moved_under_jarvis_is_said_moved_not_deleted(tmp_path: Path) -> None:
    """The journal moved whole: the 503 and the exit line say so, and how to get it back."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path) as jarvis, httpx.Client(timeout=ANSWER_S) as client:
        created = jarvis.call(client, "jarvis.run.create", argv=["true"])
        assert created.status_code == 200, created.text
        moved = tmp_path / "moved-state"
        jarvis.state_dir.rename(moved)
        answer = jarvis.call(client, "jarvis.run.get", run_id=created.json()["run_id"])
        assert answer.status_code == 503, answer.text
        error = answer.json()["error"]
        assert "the journal file was moved while in use" in error, error
        assert "nothing recorded was lost" in error, error
        assert jarvis.wait(ANSWER_S) == 2, jarvis.stderr()
        stderr = jarvis.stderr()
    assert "Traceback" not in stderr, stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith("jigcmd jarvis: journal ")]
    assert "removed" not in line and "deleted" not in line, line
    assert f"; fix: move {moved} back to {jarvis.state_dir} and start again" in line, line
    assert (moved / "journal.sqlite3").is_file()


def test_a_run_whose_journal_is_lost_meanwhile_names_its_run_id_in_the_503(
    tmp_path: Path,
) -> None:
    """The run's start was recorded, then the state directory moved: the caller of
    run.create is told which run it cannot read."""
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
        # Not only its row: a journal lost between the row and the audit of its start is
        # a run that never started (a 503 without a run id), which is not this test's case.
        while not jarvis.run_started():
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.05)
        jarvis.state_dir.rename(tmp_path / "moved-state")
        caller.join(ANSWER_S)
        (answer,) = answers
        assert answer.status_code == 503, answer.text
        assert answer.json()["run_id"] == 1, answer.text
        error = answer.json()["error"]
        assert error.endswith("; run 1 had started, its end is not recorded; jarvis stops"), error
        assert jarvis.wait(ANSWER_S) == 2, jarvis.stderr()
    assert "Traceback" not in jarvis.stderr(), jarvis.stderr()
