"""jigcmd processes of different PID namespaces sharing one state directory (containers).

A second instance runs in a PID namespace of its own (`unshare --pid --fork --mount-proc`,
as a container would give it), on the same state directory and cgroups: its recovery must
leave a live owner's run alone, however the owner's pid reads in its own /proc, and must
still fence the run of an owner that died there.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from jigcmd.durable.recovery import UNCERTAIN_REASON
from jigcmd.journal import liveness
from tests.lifetime.candidates import LINGER, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig
from tests.lifetime.watch import alive, wait_for
from tests.required import unavailable

pytestmark = pytest.mark.envelope

# The supervisor's own wording when it fenced a run whose server died (as in test_kill).
SERVER_WENT_AWAY = "the server went away during the run; the run was fenced without a proved result"


def _elsewhere() -> tuple[str, ...]:
    """The command prefix that runs a process in a PID namespace (and /proc) of its own."""
    unshare = shutil.which("unshare")
    if unshare is None:
        unavailable("needs unshare (Debian package util-linux)")
    # --kill-child: the namespace dies with its launcher, so a test never leaves one behind.
    return (unshare, "--pid", "--fork", "--mount-proc", "--kill-child")


def _run_elsewhere(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`jigcmd ARGS…` in a PID namespace of its own, to its end."""
    return subprocess.run(
        [*_elsewhere(), sys.executable, "-m", "jigcmd", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _child(pid: int) -> int:
    """The one child of `pid` (the namespace's first process, under `unshare --fork`)."""
    found: list[int] = []

    def present() -> bool:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
            found[:] = [int(word) for word in handle.read().split()]
        return len(found) == 1

    wait_for(present, 30, f"the child of {pid}")
    return found[0]


def _value(line: bytes) -> dict[str, object]:
    message = json.loads(line)
    assert "result" in message, message
    value: dict[str, object] = message["result"]["value"]
    return value


def test_recovery_in_another_pid_namespace_leaves_a_live_owners_run_alone(rig: Rig) -> None:
    """`recover` and a starting `serve` of another namespace: the running call ends as its own."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-shared"
    server = rig.serve()
    request_id = rig.next_id("call")
    server.send(flow_call(request_id, operation_id, cli_input(LINGER, token)))
    candidate = rig.candidate(token)

    recovered = _run_elsewhere("recover", "--state-dir", str(rig.state_dir))
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert operation_id not in recovered.stdout
    # A server starting there recovers first (its ping answer proves start-up is over).
    ping = json.dumps({"jsonrpc": "2.0", "id": "p", "method": "ping"}) + "\n"
    other = _run_elsewhere(
        "serve",
        "--binding",
        str(rig.binding),
        "--state-dir",
        str(rig.state_dir),
        "--run-id",
        "run-elsewhere",
        stdin=ping,
    )
    assert other.returncode == 0, other.stderr
    assert '"id":"p"' in other.stdout.replace(" ", ""), other.stdout + other.stderr

    row = rig.row(operation_id)
    assert row is not None and row.is_open, row
    assert alive(candidate)
    # The candidate ends as it would have: its server answers with its real evidence.
    rig.signal(candidate, signal.SIGTERM)
    value = _value(server.response(request_id))
    assert value["exitCode"] == 0, value
    assert f"started {token}" in str(value["stdout"]), value
    assert f"ended {token}" in str(value["stdout"]), value
    assert server.close_input() == 0
    rig.assert_nothing_left()
    final = rig.row(operation_id)
    assert final is not None and final.state == "done" and final.cleanup == "complete"
    assert rig.watch.runs(token) == 1


def test_an_owner_killed_in_another_pid_namespace_is_fenced_from_this_one(rig: Rig) -> None:
    """SIGKILL of a server in its own namespace: recovery here closes its run uncertain."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-killed-elsewhere"
    server = rig.serve(launcher=_elsewhere())
    request_id = rig.next_id("call")
    server.send(flow_call(request_id, operation_id, cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    row = rig.row(operation_id)
    assert row is not None and row.is_open
    # Recorded as its own namespace reads it: pid 1 there, not this namespace's pid 1.
    assert row.owner.pid == 1 and row.owner.pidns != os.stat("/proc/self/ns/pid").st_ino
    lock = Path(liveness.lock_path(rig.state_dir, row.owner))
    assert lock.exists()

    # The namespace's first process is the server: killing it kills all of the namespace.
    os.kill(_child(server.pid), signal.SIGKILL)
    server.process.wait(timeout=60)
    wait_for(lambda: not alive(candidate), 30, "the candidate to die with its namespace")
    output = rig.recover()
    assert f"closed {operation_id} (run {rig.run_id};" in output, output
    assert "as uncertain: cleanup complete" in output, output
    final = rig.row(operation_id)
    assert final is not None and final.state == "uncertain", final
    assert final.reason == UNCERTAIN_REASON and final.cleanup == "complete", final
    # Whoever found it dead removed its liveness file.
    assert not lock.exists()
    # Asked again (here, in the same caller's run): UNCERTAIN for good, nothing ran twice.
    again = rig.serve()
    ask = rig.next_id("again")
    again.send(flow_call(ask, operation_id, cli_input(LINGER, token)))
    error = again.answer(ask)["error"]
    assert (error["data"]["code"], error["message"]) == ("UNCERTAIN", UNCERTAIN_REASON), error
    assert again.close_input() == 0
    assert rig.watch.runs(token) == 1
    rig.assert_nothing_left()


def test_a_supervisor_outliving_its_owner_elsewhere_is_waited_for(rig: Rig) -> None:
    """The server killed there, its zygote still fencing: recovery here waits for it, no clash."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-supervisor-elsewhere"
    # A shell is the namespace's first process, so the server's death leaves its zygote.
    shell = ("sh", "-c", '"$@"; exit $?', "sh")
    server = rig.serve(launcher=(*_elsewhere(), *shell))
    request_id = rig.next_id("call")
    server.send(flow_call(request_id, operation_id, cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    rig.supervisor(operation_id)  # recorded by then (a cold launch records it once started)
    row = rig.row(operation_id)
    assert row is not None and row.is_open and row.supervisor is not None
    # The supervisor holds its own liveness lock, as its server does.
    assert Path(liveness.lock_path(rig.state_dir, row.supervisor)).exists()
    assert Path(liveness.lock_path(rig.state_dir, row.owner)).exists()

    os.kill(_child(_child(server.pid)), signal.SIGKILL)
    output = rig.recover()
    assert "problem" not in output, output
    wait_for(lambda: not alive(candidate), 30, "the candidate to be fenced")
    server.process.wait(timeout=60)
    # The candidate's death comes before the end is recorded: its supervisor writes the row
    # after proving the cleanup, or recovery did (when the dead server's lock was already gone).
    wait_for(lambda: _closed(rig, operation_id), 30, "the run's end to be recorded")
    final = rig.row(operation_id)
    assert final is not None and final.state == "uncertain", final
    assert final.reason in (UNCERTAIN_REASON, SERVER_WENT_AWAY), final
    assert final.cleanup == "complete", final
    assert rig.watch.runs(token) == 1
    rig.assert_nothing_left()


def _closed(rig: Rig, operation_id: str) -> bool:
    row = rig.row(operation_id)
    return row is not None and not row.is_open


def test_proc_of_another_namespace_is_not_read_as_ours(rig: Rig) -> None:
    """The identity recorded there is not judged by this namespace's /proc (pid 1 here)."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-pid-one"
    server = rig.serve(launcher=_elsewhere())
    request_id = rig.next_id("call")
    server.send(flow_call(request_id, operation_id, cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    # Recovery here, while that server lives: its run goes on.
    assert operation_id not in rig.recover()
    assert alive(candidate)
    rig.signal(candidate, signal.SIGTERM)
    value = _value(server.response(request_id))
    assert value["exitCode"] == 0 and f"ended {token}" in str(value["stdout"]), value
    assert server.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def _openers(directory: Path) -> dict[str, set[int]]:
    """Every file of `directory` some process holds open, with the pids holding it."""
    found: dict[str, set[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{entry}/fd/{fd}")
            except OSError:
                continue
            if os.path.dirname(target) == str(directory):
                found.setdefault(os.path.basename(target), set()).add(int(entry))
    return found


def test_each_liveness_lock_is_held_by_its_owner_alone(rig: Rig) -> None:
    """Server and zygote hold their own; no spawner, pid 1 or candidate shares one."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-locks"
    server = rig.serve()
    rig.prepared(server)
    request_id = rig.next_id("call")
    server.send(flow_call(request_id, operation_id, cli_input(LINGER, token)))
    candidate = rig.candidate(token)
    rig.supervisor(operation_id)
    row = rig.row(operation_id)
    assert row is not None and row.supervisor is not None

    openers = _openers(rig.state_dir / liveness.DIRECTORY)
    owners = {row.owner.pid, row.supervisor.pid}
    assert {pid for pids in openers.values() for pid in pids} == owners, openers
    for who in (row.owner, row.supervisor):
        assert openers[os.path.basename(liveness.lock_path(rig.state_dir, who))] == {who.pid}
    rig.signal(candidate, signal.SIGTERM)
    assert _value(server.response(request_id))["exitCode"] == 0
    assert server.close_input() == 0
    rig.assert_nothing_left()
    # A clean exit takes its file with it.
    assert not any((rig.state_dir / liveness.DIRECTORY).iterdir())
