"""Joiners in other `serve` processes whose operation's server A is SIGKILLed mid-run.

A's supervisor is stopped (SIGSTOP) so that nothing closes the row but recovery, whose pass
then spends its supervisor grace (3 s) with the row closed but its run not yet fenced. A
joiner answers only once the run is fenced and its cleanup proved, whoever runs the pass
(another joiner, or itself when that one died mid-pass); one pass runs at a time per state
directory; a joiner's own deadline and cancel end its wait while a pass goes on.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
import uuid

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.lifetime.candidates import LINGER, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig
from tests.lifetime.test_waiters_elsewhere import _cancel, _error, _joins
from tests.lifetime.watch import Proc, alive, wait_for

pytestmark = pytest.mark.envelope

_FENCED = "a prior command dispatch was fenced without a proved result"
_IN_PROGRESS = "recovery started; cleanup not yet confirmed"


def _two_joiners(rig: Rig, op: str) -> tuple[ServeChild, ServeChild, Proc, Proc, object]:
    """A runs `op`, B and C join it, A's supervisor is stopped and A killed."""
    token = f"tok-{uuid.uuid4().hex}"
    input = cli_input(LINGER, token)
    a, b, c = rig.serve(), rig.serve(), rig.serve()
    a.send(flow_call("a-1", op, input))
    candidate = rig.candidate(token)
    b.send(flow_call("b-1", op, input))
    c.send(flow_call("c-1", op, input))
    wait_for(lambda: _joins(rig, op) == 2, 30, "B's and C's joins")
    supervisor = rig.supervisor(op)
    rig.stop(supervisor)
    a.kill()
    return b, c, candidate, supervisor, input


def _first_answer(joiners: dict[str, ServeChild], within: float) -> tuple[str, bytes] | None:
    """The first answer any of `joiners` (by request id) gives within `within` s, or None."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        for request_id, server in joiners.items():
            if server.answered(request_id):
                return request_id, server.response(request_id)
        time.sleep(0.01)
    return None


def _pass_holder(rig: Rig) -> int:
    """The pid holding the state directory's recovery pass lock (from /proc/locks)."""
    lock = rig.state_dir / "recovery.lock"
    inode = lock.stat().st_ino if lock.exists() else None
    with open("/proc/locks", encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            if fields[1] == "FLOCK" and int(fields[5].rsplit(":", 1)[1]) == inode:
                return int(fields[4])
    raise AssertionError("no process holds the recovery pass lock")


def _fenced_complete(rig: Rig, op: str, line: bytes, candidate: Proc, supervisor: Proc) -> None:
    error = _error(line)
    assert (error["data"]["code"], error["message"]) == ("UNCERTAIN", _FENCED), error
    assert not alive(candidate) and not alive(supervisor), "answered while the run was alive"
    row = rig.row(op)
    assert row is not None and (row.state, row.cleanup) == ("uncertain", "complete")


def test_a_joiner_answers_only_once_another_joiners_pass_fenced_the_run(rig: Rig) -> None:
    """B and C join; one runs the pass, the other sees the row it closed at once: neither
    answers before the run is fenced (until 2026-12-07 the other answered "fenced" at once,
    the candidate still running for ~3 s)."""
    op = "op-two-joiners"
    b, c, candidate, supervisor, _ = _two_joiners(rig, op)
    first = _first_answer({"b-1": b, "c-1": c}, 60)
    assert first is not None
    request_id, line = first
    _fenced_complete(rig, op, line, candidate, supervisor)
    other, server = ("c-1", c) if request_id == "b-1" else ("b-1", b)
    answered = server.response(other)
    assert answered.replace(other.encode(), request_id.encode()) == line
    rig.resume(supervisor)
    assert b.close_input() == 0 and c.close_input() == 0
    rig.assert_nothing_left()


def test_a_joiner_fences_the_run_when_the_joiner_running_the_pass_is_killed(rig: Rig) -> None:
    """The joiner whose pass closed the row is SIGKILLed mid-pass: the other one runs the
    pass again and answers once the run is fenced (until 2026-12-07 it had answered "fenced"
    already, and the candidate ran on until the next start or `jigcmd recover`)."""
    op = "op-recoverer-killed"
    b, c, candidate, supervisor, input = _two_joiners(rig, op)

    def closed_unfenced() -> bool:
        row = rig.row(op)
        return row is not None and not row.is_open and row.problems == _IN_PROGRESS

    wait_for(closed_unfenced, 30, "a pass to close the row")
    early = _first_answer({"b-1": b, "c-1": c}, 0.5)
    assert early is None, f"answered while the pass had not fenced the run: {early}"
    holder = _pass_holder(rig)
    recovering, survivor, request_id = (b, c, "c-1") if holder == b.pid else (c, b, "b-1")
    assert holder == recovering.pid
    recovering.kill()
    line = survivor.response(request_id)
    _fenced_complete(rig, op, line, candidate, supervisor)
    survivor.send(flow_call("x-2", op, input))
    assert survivor.response("x-2") == line.replace(request_id.encode(), b"x-2")
    rig.resume(supervisor)
    assert survivor.close_input() == 0
    rig.assert_nothing_left()


def _one_joiner(
    rig: Rig, op: str, token: str | None = None, **extra: object
) -> tuple[ServeChild, ServeChild, Proc, Proc]:
    """A runs `op` (its candidate marked `token`), B joins it (`extra`: B's further params),
    A's supervisor stopped."""
    token = token or f"tok-{uuid.uuid4().hex}"
    input = cli_input(LINGER, token)
    a, b = rig.serve(), rig.serve()
    a.send(flow_call("a-1", op, input))
    candidate = rig.candidate(token)
    b.send(flow_call("b-1", op, input, **extra))
    wait_for(lambda: _joins(rig, op) == 1, 30, "B's join")
    supervisor = rig.supervisor(op)
    rig.stop(supervisor)
    return a, b, candidate, supervisor


def _fenced_later(rig: Rig, op: str, candidate: Proc, supervisor: Proc) -> None:
    """The pass B began goes on after B's answer: the run is fenced, its cleanup proved."""
    wait_for(lambda: not alive(candidate) and not alive(supervisor), 30, "the run fenced")
    row = rig.row(op)
    assert row is not None and (row.state, row.cleanup) == ("uncertain", "complete")
    rig.resume(supervisor)


def test_a_joiners_deadline_ends_its_wait_while_its_pass_runs(rig: Rig) -> None:
    """B's deadline passes 1.5 s into its pass (until 2026-12-07 it answered when the pass
    ended, 1.6 s late)."""
    op = "op-deadline-mid-pass"
    deadline_ms = time.time_ns() // 1_000_000 + 9000
    a, b, candidate, supervisor = _one_joiner(rig, op, deadlineUnixMs=deadline_ms)
    time.sleep(max(0.0, deadline_ms / 1000 - time.time() - 2.5))
    a.kill()
    line = b.response("b-1")
    late = time.time() - deadline_ms / 1000
    error = _error(line)
    assert error["data"]["code"] == "DEADLINE_EXCEEDED", error
    assert "was being fenced by recovery" in error["message"]
    assert late < 0.5, f"answered {late:.2f} s after its deadline"
    _fenced_later(rig, op, candidate, supervisor)
    assert b.close_input() == 0
    rig.assert_nothing_left()


def test_a_joiners_cancel_ends_its_wait_while_its_pass_runs(rig: Rig) -> None:
    """B is cancelled 1.3 s after A's kill, its pass waiting for the stopped supervisor
    (until 2026-12-07 it answered 2.7 s later, when the pass ended)."""
    op = "op-cancel-mid-pass"
    a, b, candidate, supervisor = _one_joiner(rig, op)
    a.kill()
    time.sleep(1.3)
    cancelled = time.monotonic()
    b.send(_cancel("b-1"))
    line = b.response("b-1")
    took = time.monotonic() - cancelled
    error = _error(line)
    assert error["data"]["code"] == "CANCELLED", error
    assert "was being fenced by recovery" in error["message"]
    assert took < 0.5, f"answered {took:.2f} s after its cancel"
    _fenced_later(rig, op, candidate, supervisor)
    assert b.close_input() == 0
    rig.assert_nothing_left()


def test_jigcmd_recover_waits_for_a_pass_running_elsewhere(rig: Rig) -> None:
    """A pass holding the state directory's lock (as a joiner's or a starting server's does)
    keeps `jigcmd recover` waiting: two passes at once released the same cgroup jobs, the
    second warning of cleanups it could not confirm (until 2026-12-07)."""
    server = rig.serve()
    assert server.close_input() == 0
    fd = os.open(rig.state_dir / "recovery.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        command = [sys.executable, "-m", "jigcmd", "recover", "--state-dir", str(rig.state_dir)]
        recover = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        try:
            with pytest.raises(subprocess.TimeoutExpired):
                recover.wait(timeout=3)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        out, _ = recover.communicate(timeout=60)
    finally:
        os.close(fd)
    assert recover.returncode == 0, out
    assert "nothing to recover" in out
    rig.assert_nothing_left()


def _closed_unfenced(rig: Rig, op: str) -> bool:
    row = rig.row(op)
    return row is not None and not row.is_open and row.problems == _IN_PROGRESS


def test_the_call_sent_again_elsewhere_waits_for_the_pass_running(rig: Rig) -> None:
    """The same call sent to a third server D while B's pass holds the row closed but not
    fenced: D answers only once the run is fenced (until 2026-12-07 it answered "fenced" at
    once, the candidate still running)."""
    op, token = "op-resent-mid-pass", f"tok-{uuid.uuid4().hex}"
    d = rig.serve()
    a, b, candidate, supervisor = _one_joiner(rig, op, token)
    a.kill()
    wait_for(lambda: _closed_unfenced(rig, op), 30, "B's pass to close the row")
    d.send(flow_call("d-1", op, cli_input(LINGER, token)))
    line = d.response("d-1")
    _fenced_complete(rig, op, line, candidate, supervisor)
    assert b.response("b-1") == line.replace(b"d-1", b"b-1")
    rig.resume(supervisor)
    assert b.close_input() == 0 and d.close_input() == 0
    rig.assert_nothing_left()


def test_the_call_sent_again_runs_the_pass_its_killed_holder_left(rig: Rig) -> None:
    """B, running the pass, is SIGKILLed midway; the same call sent to D runs the pass
    itself and answers once the run is fenced (until 2026-12-07 D answered "fenced" at once
    and no pass ran: the candidate lived on)."""
    op, token = "op-resent-holder-killed", f"tok-{uuid.uuid4().hex}"
    d = rig.serve()
    a, b, candidate, supervisor = _one_joiner(rig, op, token)
    a.kill()
    wait_for(lambda: _closed_unfenced(rig, op), 30, "B's pass to close the row")
    assert _pass_holder(rig) == b.pid
    b.kill()
    d.send(flow_call("d-1", op, cli_input(LINGER, token)))
    _fenced_complete(rig, op, d.response("d-1"), candidate, supervisor)
    rig.resume(supervisor)
    assert d.close_input() == 0
    rig.assert_nothing_left()


def test_a_joiner_names_a_lock_file_it_cannot_use(rig: Rig) -> None:
    """A symbolic link at the pass lock: B answers `UNCERTAIN` naming it and the fix (until
    2026-12-07 "internal error in the command service", the reason only in its stderr)."""
    op = "op-lock-symlink"
    a, b, candidate, supervisor = _one_joiner(rig, op)
    lock = rig.state_dir / "recovery.lock"
    lock.unlink()
    lock.symlink_to(rig.tmp / "jigcmd-elsewhere")
    a.kill()
    error = _error(b.response("b-1"))
    assert error["data"]["code"] == "UNCERTAIN", error
    assert "cannot fence its run: recovery pass lock " in error["message"], error
    assert "is a symbolic link" in error["message"] and "fix: remove " in error["message"]
    lock.unlink()
    rig.resume(supervisor)
    assert rig.recover()  # the run fenced as an operator would
    wait_for(lambda: not alive(candidate), 30, "the run fenced")
    assert b.close_input() == 0
    rig.assert_nothing_left()
