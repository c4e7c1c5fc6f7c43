"""A stop that meets the candidate's own end: the evidence is the end pid 1 saw, not "nothing ran".

The race, made deterministic from the host: the zygote is frozen (SIGSTOP) while the cancel
reaches its run socket and only then the candidate exits by itself (pid 1 reports `exit 0`
and exits). Resumed, the zygote finds the cancel first (epoll hands back descriptors in the
order they turned readable), starts the stop, and reads pid 1's report while it fences. The
candidate had ended on its own: the run's evidence is that end (`exited`, exit 0), fenced and
released as always, and the answer, the replay and the journal agree on it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.lifetime.candidates import LINGER, cli_input
from tests.lifetime.frames import flow_call, mcp_initialized, tool_call
from tests.lifetime.rig import Rig
from tests.lifetime.watch import alive, parent, wait_for

pytestmark = pytest.mark.envelope


def _end_behind_a_cancel(rig: Rig, server: ServeChild, token: str, cancel: dict[str, Any]) -> None:
    """With the zygote frozen: `cancel` reaches it, then the candidate exits 0 by itself."""
    candidate = rig.candidate(token)
    init = parent(candidate)
    assert init is not None
    zygote = rig.zygote(server)
    rig.stop(zygote)
    server.send(cancel)
    # Two round trips: the cancel was read, and the server has forwarded it since.
    server.ping(rig.next_id("after-cancel"))
    server.ping(rig.next_id("after-cancel"))
    rig.signal(candidate, signal.SIGTERM)
    # Pid 1 reported the candidate's end and exited (a zombie until the zygote reaps it).
    wait_for(lambda: not alive(init), 30, "pid 1's exit")
    rig.resume(zygote)


def _exited(evidence: dict[str, Any], token: str) -> None:
    assert (evidence["stopReason"], evidence["exitCode"]) == ("exited", 0), evidence
    assert evidence["signal"] is None
    assert evidence["stdout"]["text"] == f"started {token}\nended {token}\n"
    assert evidence["cleanup"] == "complete"


def _ran_once_and_left_nothing(rig: Rig, operation_id: str, token: str) -> None:
    row = rig.row(operation_id)
    assert row is not None and (row.state, row.outcome) == ("done", "evidence")
    rig.assert_nothing_left()
    assert rig.watch.runs(token) == 1


def test_a_run1_cancel_that_meets_the_candidates_own_exit_answers_its_evidence(rig: Rig) -> None:
    """request/cancel of the only waiter, then the candidate's own exit 0: the cancelled caller
    is answered with how the work ended (its evidence), and the operation replays that."""
    token, operation_id = f"tok-{uuid.uuid4().hex}", "op-cancel-meets-exit"
    input = cli_input(LINGER, token)
    server = rig.serve()
    server.send(flow_call("call-1", operation_id, input))
    cancel = {"jsonrpc": "2.0", "method": "request/cancel", "params": {"requestId": "call-1"}}
    _end_behind_a_cancel(rig, server, token, cancel)
    answer = json.loads(server.response("call-1"))
    assert "error" not in answer, answer
    _exited(answer["result"]["value"], token)
    server.send(flow_call("call-2", operation_id, input))
    assert json.loads(server.response("call-2"))["result"] == answer["result"]
    assert server.close_input() == 0
    again = rig.serve()
    again.send(flow_call("call-3", operation_id, input))
    assert json.loads(again.response("call-3"))["result"] == answer["result"]
    assert again.close_input() == 0
    # The journal keeps a signed statement of that run, as of any run that exited.
    attest = [sys.executable, "-m", "jigcmd", "attest", "--run-id", rig.run_id, operation_id]
    attest += ["--state-dir", str(rig.state_dir)]
    fetched = subprocess.run(attest, capture_output=True, timeout=120, check=False)
    assert fetched.returncode == 0, fetched.stderr
    _ran_once_and_left_nothing(rig, operation_id, token)


def test_an_mcp_cancel_that_meets_the_candidates_own_exit_keeps_its_evidence(rig: Rig) -> None:
    """notifications/cancelled, then the candidate's own exit 0: the cancelled request is not
    answered, and the keyed retry gets the run's evidence, as the journal records it."""
    token, key = f"tok-{uuid.uuid4().hex}", "op-mcp-cancel-meets-exit"
    server = mcp_initialized(rig.serve(protocol="mcp"))
    server.send(tool_call(2, LINGER, token, key))
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    _end_behind_a_cancel(rig, server, token, cancel)
    server.send(tool_call(3, LINGER, token, key))
    result = json.loads(server.response(3))["result"]
    assert result["isError"] is False, result
    content = result["structuredContent"]
    assert (content["stopReason"], content["exitCode"]) == ("exited", 0), content
    assert content["cleanup"] == "complete"
    assert server.close_input() == 0
    assert not [line for line in server.lines if json.loads(line).get("id") == 2]
    _ran_once_and_left_nothing(rig, key, token)
