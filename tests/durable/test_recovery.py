"""Recovery: a dead server's open runs are fenced, released, verified and closed as uncertain."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from jigcmd.durable.recovery import STALE_AFTER_S, UNCERTAIN_REASON, recover
from jigcmd.envelope.cgroups import CgroupBackend
from jigcmd.journal.identity import ProcessIdentity, current, identify
from jigcmd.journal.store import Journal
from jigcmd.plan import Limits
from tests.durable.recovering import (
    RUN,
    FakeBackend,
    begin_row,
    fake_supervisor,
    in_dead_server,
    move_into,
    processes,
    real_backend,
    running,
)

__all__ = ["processes", "real_backend"]  # the fixtures, from tests/durable/recovering.py


def test_a_dispatching_row_of_a_dead_server_closes_uncertain_and_cannot_be_claimed_later(
    tmp_path: Path,
) -> None:
    """Before any supervisor: the row closes uncertain, complete, and a late record fails."""
    in_dead_server(tmp_path, lambda j: begin_row(j, "op-1", "r1"))
    with Journal.open(tmp_path) as journal:
        report = recover(journal, FakeBackend(), supervisor_grace=0)
        row = journal.get("op-1", root_run=RUN)
        assert not journal.record_envelope(
            "op-1", root_run=RUN, supervisor=current(), cgroup_paths=(), netns="", plan_digest=""
        )
    assert [r.operation_id for r in report.closed] == ["op-1"]
    assert report.clean
    assert row is not None
    assert (row.state, row.reason, row.cleanup, row.problems) == (
        "uncertain",
        UNCERTAIN_REASON,
        "complete",
        "",
    )


def test_the_same_operation_id_open_in_two_dead_runs_is_fenced_in_both(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    """Recovery fences every dead server's row whatever its run: one operation id, two runs."""
    first, second = fake_supervisor(processes), fake_supervisor(processes)
    backend = FakeBackend()
    backend.add("jigcmd-r1")
    backend.add("jigcmd-r2")

    def both(journal: Journal) -> None:
        running("candidate-tests", "r1", first, "run-a")(journal)
        running("candidate-tests", "r2", second, "run-b")(journal)

    in_dead_server(tmp_path, both)
    with Journal.open(tmp_path) as journal:
        report = recover(journal, backend, supervisor_grace=0)
        rows = [journal.get("candidate-tests", root_run=run) for run in ("run-a", "run-b")]
    assert sorted((r.root_run, r.run_id, r.supervisor_killed) for r in report.closed) == [
        ("run-a", "r1", True),
        ("run-b", "r2", True),
    ]
    assert report.clean
    assert [(r.state, r.cleanup) for r in rows if r is not None] == [
        ("uncertain", "complete"),
        ("uncertain", "complete"),
    ]
    assert backend.jobs == {}
    assert [proc.wait() for proc in processes] == [-signal.SIGKILL, -signal.SIGKILL]


def test_a_live_supervisor_is_killed_and_its_cgroup_job_removed(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    """A supervisor that outlives the grace is SIGKILLed; the job is killed and removed."""
    supervisor = fake_supervisor(processes)
    backend = FakeBackend()
    job = backend.add("jigcmd-r1")
    in_dead_server(tmp_path, running("op-1", "r1", supervisor))
    with Journal.open(tmp_path) as journal:
        report = recover(journal, backend, supervisor_grace=0)
        row = journal.get("op-1", root_run=RUN)
    assert processes[0].wait() == -signal.SIGKILL
    assert report.closed[0].supervisor_killed
    assert report.closed[0].cleanup_complete
    assert job.killed >= 1
    assert backend.jobs == {}
    assert row is not None
    assert (row.state, row.cleanup) == ("uncertain", "complete")


def _ended(
    operation_id: str, run_id: str, supervisor: ProcessIdentity
) -> Callable[[Journal], object]:
    """A server that recorded its run's evidence and died before the cleanup was proved."""
    begun = running(operation_id, run_id, supervisor)

    def action(journal: Journal) -> None:
        begun(journal)
        assert journal.record_result(
            operation_id, root_run=RUN, outcome="evidence", result=b"evidence"
        )

    return action


def test_a_row_with_recorded_evidence_closes_done_once_recovery_proves_the_cleanup(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    """Evidence durable, server dead mid-cleanup: fenced, released, then done with it."""
    backend = FakeBackend()
    job = backend.add("jigcmd-r1")
    in_dead_server(tmp_path, _ended("op-1", "r1", fake_supervisor(processes)))
    with Journal.open(tmp_path) as journal:
        report = recover(journal, backend, supervisor_grace=0)
        row = journal.get("op-1", root_run=RUN)
    assert job.killed >= 1
    assert backend.jobs == {}
    assert report.closed[0].cleanup_complete
    assert row is not None
    assert (row.state, row.outcome, row.result, row.cleanup, row.reason) == (
        "done",
        "evidence",
        b"evidence",
        "complete",
        "",
    )


def test_a_row_with_recorded_evidence_is_uncertain_when_its_cleanup_cannot_be_proved(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    """The same, but a task survives every kill: uncertain, cleanup failed, never done."""
    backend = FakeBackend()
    backend.add("jigcmd-r1", stuck=True)
    in_dead_server(tmp_path, _ended("op-1", "r1", fake_supervisor(processes)))
    with Journal.open(tmp_path) as journal:
        report = recover(journal, backend, supervisor_grace=0, empty_wait=0)
        row = journal.get("op-1", root_run=RUN)
    assert not report.clean
    assert row is not None
    assert (row.state, row.cleanup, row.reason) == ("uncertain", "failed", UNCERTAIN_REASON)


def test_a_supervisor_that_exits_by_itself_within_the_grace_is_not_killed(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    """A supervisor fencing its own run (here: exiting at EOF) is waited for, not killed."""
    proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    processes.append(proc)
    supervisor = identify(proc.pid)
    assert supervisor is not None
    in_dead_server(tmp_path, running("op-1", "r1", supervisor))
    assert proc.stdin is not None
    proc.stdin.close()
    with Journal.open(tmp_path) as journal:
        report = recover(journal, FakeBackend(), supervisor_grace=30)
    assert proc.wait() == 0
    assert not report.closed[0].supervisor_killed
    assert report.clean


def test_an_unconfirmed_cleanup_is_recorded_failed_and_confirmed_by_a_later_pass(
    tmp_path: Path,
) -> None:
    """A job that will not empty leaves cleanup failed (for doctor); a later pass can confirm it."""
    backend = FakeBackend()
    backend.add("jigcmd-r1", stuck=True)
    in_dead_server(tmp_path, lambda j: begin_row(j, "op-1", "r1"))
    with Journal.open(tmp_path) as journal:
        first = recover(journal, backend, supervisor_grace=0)
        failures = journal.cleanup_failures()
        backend.jobs["jigcmd-r1"].stuck = False
        second = recover(journal, backend, supervisor_grace=0)
        row = journal.get("op-1", root_run=RUN)
    assert not first.clean
    assert first.closed[0].problems == ("cgroup job jigcmd-r1 still populated after kill",)
    assert [(r.operation_id, r.state, r.cleanup) for r in failures] == [
        ("op-1", "uncertain", "failed")
    ]
    assert failures[0].problems == "cgroup job jigcmd-r1 still populated after kill"
    assert second.closed == ()
    assert [r.operation_id for r in second.rechecked] == ["op-1"]
    assert second.clean
    assert row is not None
    assert (row.state, row.cleanup) == ("uncertain", "complete")


def test_rows_of_a_live_server_and_unowned_jobs_are_left_alone(tmp_path: Path) -> None:
    """Our own open row stays open and its job untouched; a job no row names is only reported."""
    backend = FakeBackend()
    ours = backend.add("jigcmd-r1")
    stranger = backend.add("jigcmd-test-elsewhere")
    with Journal.open(tmp_path) as journal:
        begin_row(journal, "op-1", "r1")
        report = recover(journal, backend, supervisor_grace=0)
        row = journal.get("op-1", root_run=RUN)
    assert report.live == ("op-1",)
    assert report.closed == ()
    assert report.unowned_jobs == ("jigcmd-test-elsewhere",)
    assert (ours.killed, stranger.killed) == (0, 0)
    assert row is not None
    assert row.state == "dispatching"


def test_a_jarvis_run_of_a_dead_server_is_fenced_and_closed_uncertain(tmp_path: Path) -> None:
    """A running jarvis row whose server died: its envelope job is removed, status uncertain."""
    backend = FakeBackend()
    backend.add("jigcmd-j1")
    ids: list[int] = []

    def action(journal: Journal) -> None:
        journal.jarvis_begin(
            tool="jarvis.run.create",
            argv=["/bin/true"],
            cwd="/",
            actor="tok_x_0000",
            decision="allow",
            matched_rule="true",
            reason="allowed",
            envelope_run_id="j1",
        )

    in_dead_server(tmp_path, action)
    with Journal.open(tmp_path) as journal:
        ids = [r.run_id for r in journal.jarvis_running()]
        report = recover(journal, backend, supervisor_grace=0)
        run = journal.jarvis_get(ids[0])
    assert report.jarvis_closed == tuple(ids)
    assert backend.jobs == {}
    assert run is not None
    assert run.status == "uncertain"


def test_nothing_is_redispatched_a_done_row_is_untouched(tmp_path: Path) -> None:
    """Closed, cleanly finished rows are neither re-run nor changed by recovery."""

    def action(journal: Journal) -> None:
        begin_row(journal, "op-1", "r1")
        journal.finish(
            "op-1",
            root_run=RUN,
            outcome="evidence",
            result=b"{}",
            report=None,
            cleanup_complete=True,
        )

    in_dead_server(tmp_path, action)
    backend = FakeBackend()
    with Journal.open(tmp_path) as journal:
        before = journal.get("op-1", root_run=RUN)
        report = recover(journal, backend, supervisor_grace=0)
        after = journal.get("op-1", root_run=RUN)
    assert report.closed == () and report.rechecked == ()
    assert before == after
    assert backend.jobs == {}


# -- the real machine -------------------------------------------------------------------


@pytest.mark.envelope
def test_recovery_kills_a_real_orphaned_run_and_removes_its_cgroup(
    tmp_path: Path, real_backend: CgroupBackend, processes: list[subprocess.Popen[bytes]]
) -> None:
    """A live supervisor and a process in a real cgroup job: both killed, job gone, row closed."""
    run_id = f"test-{uuid.uuid4().hex[:12]}"
    job = real_backend.create(f"jigcmd-{run_id}", Limits())
    try:
        # A candidate in a network namespace of its own, as in a real envelope.
        candidate = subprocess.Popen(
            ["unshare", "--net", "sh", "-c", "echo ready; exec sleep 1000"],
            stdout=subprocess.PIPE,
        )
        processes.append(candidate)
        assert candidate.stdout is not None
        assert candidate.stdout.readline() == b"ready\n"
        candidate.stdout.close()
        move_into(job, candidate.pid)
        netns = os.readlink(f"/proc/{candidate.pid}/ns/net")
        assert netns != os.readlink("/proc/self/ns/net")
        supervisor = fake_supervisor(processes)

        def action(journal: Journal) -> None:
            begin_row(journal, "op-1", run_id)
            journal.record_envelope(
                "op-1",
                root_run=RUN,
                supervisor=supervisor,
                cgroup_paths=job.paths,
                netns=netns,
                plan_digest="sha256:p",
            )

        in_dead_server(tmp_path, action)
        with Journal.open(tmp_path) as journal:
            report = recover(journal, real_backend, supervisor_grace=0)
            row = journal.get("op-1", root_run=RUN)
        assert candidate.wait() == -signal.SIGKILL
        assert processes[1].wait() == -signal.SIGKILL
        assert real_backend.open(f"jigcmd-{run_id}") is None
        assert not any(os.path.exists(p) for p in job.paths)
        assert report.closed[0].problems == ()
        assert row is not None
        assert (row.state, row.reason, row.cleanup) == ("uncertain", UNCERTAIN_REASON, "complete")
    finally:
        leftover = real_backend.open(f"jigcmd-{run_id}")
        if leftover is not None:
            leftover.kill()
            leftover.wait_empty(5.0)
            leftover.remove()


@pytest.mark.envelope
def test_recover_removes_a_dead_trees_empty_job_that_no_journal_names(
    tmp_path: Path, real_backend: CgroupBackend, processes: list[subprocess.Popen[bytes]]
) -> None:
    """`jigcmd recover` on any state directory removes an old, empty `jigcmd-<16 hex>` job;
    a young one, a populated one and a job of another name are left alone."""
    old_time = time.time() - 2 * STALE_AFTER_S
    leftover = real_backend.create(f"jigcmd-{uuid.uuid4().hex[:16]}", Limits())
    young = real_backend.create(f"jigcmd-{uuid.uuid4().hex[:16]}", Limits())
    busy = real_backend.create(f"jigcmd-{uuid.uuid4().hex[:16]}", Limits())
    other = real_backend.create(f"jigcmd-test-{uuid.uuid4().hex[:8]}", Limits())
    try:
        sleeper = subprocess.Popen(["sleep", "1000"])
        processes.append(sleeper)
        move_into(busy, sleeper.pid)
        for job in (leftover, busy, other):
            for path in job.paths:
                os.utime(path, (old_time, old_time))
        (tmp_path / "state").mkdir(mode=0o700)
        done = subprocess.run(
            [sys.executable, "-m", "jigcmd", "recover", "--state-dir", str(tmp_path / "state")],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"removed: cgroup job {leftover.name}" in done.stdout
        assert real_backend.open(leftover.name) is None
        for kept in (young, busy, other):
            assert real_backend.open(kept.name) is not None, kept.name
    finally:
        for job in (leftover, young, busy, other):
            with contextlib.suppress(OSError):
                job.kill()
                job.wait_empty(5.0)
                job.remove()


def test_a_job_another_pass_released_under_this_one_is_a_confirmed_cleanup(
    tmp_path: Path,
) -> None:
    """Two passes at once (one ran on past a stopped holder's lock): a job gone mid-kill
    (ENOENT, ENODEV) was released, not a cleanup left unconfirmed."""
    backend = FakeBackend()
    job = backend.add("jigcmd-r1")

    def released_elsewhere() -> None:
        del backend.jobs[job.name]
        raise OSError(errno.ENODEV, os.strerror(errno.ENODEV))

    job.kill = released_elsewhere  # type: ignore[method-assign]
    in_dead_server(tmp_path, lambda j: begin_row(j, "op-1", "r1"))
    with Journal.open(tmp_path) as journal:
        report = recover(journal, backend, supervisor_grace=0)
        row = journal.get("op-1", root_run=RUN)
    assert report.clean, report
    assert row is not None
    assert (row.state, row.cleanup) == ("uncertain", "complete")
