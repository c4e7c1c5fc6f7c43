"""`jigcmd prune` beside real servers: a pruned operation is refused, never run again.

The prune runs as its own `jigcmd prune` process on the state directory of a live server
(`--older-than 0s`: everything closed before it started). Open operations are left alone;
the live server goes on running and answering; a pruned operation's replay, from another
server of the same run, is the tombstone's refusal in Run/1 and in MCP.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from jigcmd.journal.store import Journal
from tests.lifetime.candidates import LINGER, QUICK, cli_input
from tests.lifetime.frames import flow_call, mcp_initialized, tool_call
from tests.lifetime.rig import Rig
from tests.lifetime.watch import wait_for

pytestmark = pytest.mark.envelope


def _prune(state_dir: Path, *extra: str) -> dict[str, Any]:
    argv = ["prune", "--state-dir", str(state_dir), "--older-than", "0s", "--json", *extra]
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def _refused(rig: Rig, message: str, operation_id: str) -> None:
    assert message.startswith(f"operation {operation_id!r} of run {rig.run_id!r} was pruned on ")
    assert message.endswith("; its evidence is gone; it is not run again")


def test_a_pruned_run1_operation_is_refused_and_a_live_server_keeps_working(rig: Rig) -> None:
    """op-a closed before the prune: refused on replay, never run again. op-b was running
    during it: untouched, answered by its live server, replayed as it was."""
    token_a, token_b = f"tok-{uuid.uuid4().hex}", f"tok-{uuid.uuid4().hex}"
    live = rig.serve()
    live.send(flow_call("call-a", "op-a", cli_input(QUICK, token_a)))
    assert json.loads(live.response("call-a"))["result"]["value"]["exitCode"] == 0
    live.send(flow_call("call-b", "op-b", cli_input(LINGER, token_b)))
    candidate = rig.candidate(token_b)

    assert _prune(rig.state_dir, "--dry-run")["operations"] == 1
    row = rig.row("op-a")
    assert row is not None and not row.pruned and row.outcome == "evidence"

    open_before = rig.row("op-b")
    assert _prune(rig.state_dir)["operations"] == 1
    assert rig.row("op-b") == open_before
    row = rig.row("op-a")
    assert row is not None and row.pruned and row.attestation is None

    rig.signal(candidate, signal.SIGTERM)
    answered = live.response("call-b")
    assert json.loads(answered)["result"]["value"]["exitCode"] == 0
    # The live server still takes new work, and records it.
    token_c = f"tok-{uuid.uuid4().hex}"
    live.send(flow_call("call-c", "op-c", cli_input(QUICK, token_c)))
    assert json.loads(live.response("call-c"))["result"]["value"]["exitCode"] == 0

    other = rig.serve()
    other.send(flow_call("again-a", "op-a", cli_input(QUICK, token_a)))
    error = json.loads(other.response("again-a"))["error"]
    assert error["data"]["code"] == "UNAVAILABLE"
    assert error["data"]["details"]["pruned"]["ending"] == "evidence"
    _refused(rig, error["message"], "op-a")
    other.send(flow_call("again-b", "op-b", cli_input(LINGER, token_b)))
    assert other.response("again-b") == answered.replace(b'"call-b"', b'"again-b"')
    assert other.close_input() == 0 and live.close_input() == 0

    assert _prune(rig.state_dir)["operations"] == 2  # op-b, op-c; op-a is not pruned twice
    rig.assert_nothing_left()
    assert rig.watch.runs(token_a) == 1


def test_a_pruned_mcp_operation_is_refused_and_its_resources_are_gone(rig: Rig) -> None:
    """The keyed retry of a pruned MCP call is the refusal; its kept streams went with it."""
    token, key = f"tok-{uuid.uuid4().hex}", "op-mcp-pruned"
    first = mcp_initialized(rig.serve(protocol="mcp"))
    first.send(tool_call(2, QUICK, token, key))
    result = json.loads(first.response(2))["result"]
    assert result["isError"] is False
    assert first.close_input() == 0
    kept = [path for path in (rig.state_dir / "resources").rglob("*") if path.is_file()]
    assert kept

    answer = _prune(rig.state_dir)
    assert answer["operations"] == 1
    assert answer["resourceOperations"] == len(kept) and answer["resourceScopes"] == 1
    assert not [path for path in (rig.state_dir / "resources").rglob("*")]

    again = mcp_initialized(rig.serve(protocol="mcp"))
    again.send(tool_call(2, QUICK, token, key))
    retried = json.loads(again.response(2))
    assert retried["result"]["isError"] is True, retried
    text = retried["result"]["content"][0]["text"]
    assert "was pruned on" in text and "it is not run again" in text
    assert again.close_input() == 0
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def _backdate(rig: Rig, operation_id: str, days: int) -> None:
    """Make the operation look closed `days` ago, as if the test had waited."""
    # The test backdates what only time would change.
    with Journal.open(rig.state_dir) as journal, journal._db.write() as conn:
        conn.execute(
            "UPDATE operations SET finished_unix_ms = finished_unix_ms - ? WHERE operation_id = ?",
            (days * 86_400_000, operation_id),
        )


def test_serve_with_retain_prunes_at_start_off_the_call_path(rig: Rig) -> None:
    """`serve --retain 1d`: an operation closed two days ago is pruned by the new server, which
    answers its replay with the refusal; one closed just now is kept and replayed."""
    old_token, new_token = f"tok-{uuid.uuid4().hex}", f"tok-{uuid.uuid4().hex}"
    first = rig.serve()
    first.send(flow_call("call-old", "op-old", cli_input(QUICK, old_token)))
    assert "result" in json.loads(first.response("call-old"))
    first.send(flow_call("call-new", "op-new", cli_input(QUICK, new_token)))
    kept = first.response("call-new")
    assert first.close_input() == 0
    _backdate(rig, "op-old", 2)

    stderr = rig.tmp / "retaining.stderr"
    args = ["--state-dir", str(rig.state_dir), "--run-id", rig.run_id, "--retain", "1d"]
    server = ServeChild(rig.binding, args, stderr_path=stderr)
    rig.servers.append(server)
    rig.watch.add_root(server.pid)
    server.ping("ready")

    def pruned() -> bool:
        row = rig.row("op-old")
        return row is not None and row.pruned

    wait_for(pruned, 30, "the retaining server's first prune")
    server.send(flow_call("again-old", "op-old", cli_input(QUICK, old_token)))
    error = json.loads(server.response("again-old"))["error"]
    _refused(rig, error["message"], "op-old")
    server.send(flow_call("again-new", "op-new", cli_input(QUICK, new_token)))
    assert server.response("again-new") == kept.replace(b'"call-new"', b'"again-new"')
    assert server.close_input() == 0
    assert "retention: pruned 1 operation(s) and 0 jarvis run(s) closed before" in (
        stderr.read_text()
    )
    rig.assert_nothing_left()
    assert rig.watch.runs(old_token) == 1 and rig.watch.runs(new_token) == 1


def test_a_retention_shorter_than_an_hour_is_refused_before_serving(rig: Rig) -> None:
    args = ["--state-dir", str(rig.state_dir), "--retain", "30m"]
    with ServeChild(rig.binding, args) as server:
        assert server.wait_exit(30) == 2
        assert "'30m' is shorter than an hour" in server.stderr()
