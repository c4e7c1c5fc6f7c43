"""End of input finishes what was read; SIGTERM or a lost stdout fence what is in flight."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import uuid
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.lifetime.candidates import LINGER, QUICK, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig

pytestmark = pytest.mark.envelope


def _in_flight(rig: Rig, token: str) -> ServeChild:
    server = rig.serve()
    server.send(flow_call("call-1", "op-in-flight", cli_input(LINGER, token)))
    rig.candidate(token)
    return server


def _assert_fenced_by_exit(rig: Rig, server: ServeChild, token: str) -> None:
    """At the instant the server has exited, its run is already gone and its row closed."""
    assert not rig.watch.running(token), "the candidate outlived the server"
    row = rig.row("op-in-flight")
    assert row is not None and not row.is_open
    live = set(rig.backend.list_jobs())
    assert row.cgroup_job not in live, "the run's cgroup job outlived the server"
    answers = [json.loads(line) for line in server.lines]
    (answer,) = [a for a in answers if a.get("id") == "call-1"]
    assert answer["error"]["data"]["code"] == "CANCELLED"
    rig.assert_nothing_left()


def test_end_of_input_lets_every_call_already_read_finish_and_answers_it(rig: Rig) -> None:
    """stdin closed right after the call: it runs to its end, is answered, and exit is 0."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve()
    server.send(flow_call("call-1", "op-piped", cli_input(QUICK, token)))
    assert server.close_input() == 0
    answers = {a["id"]: a for a in map(json.loads, server.lines)}
    evidence = answers["call-1"]["result"]["value"]
    assert (evidence["exitCode"], evidence["stopReason"]) == (0, "exited")
    assert evidence["stdout"]["text"] == f"ran {token}\n"
    row = rig.row("op-piped")
    assert row is not None and (row.state, row.outcome) == ("done", "evidence")
    rig.assert_nothing_left()


def test_a_closed_stdout_is_coordinator_loss_and_fences_the_run_in_flight(rig: Rig) -> None:
    """The reader of stdout gone mid-run: the run is fenced, its end recorded, the server exits."""
    token = f"tok-{uuid.uuid4().hex}"
    server = _in_flight(rig, token)
    assert server.close_output() == 0
    assert not rig.watch.running(token), "the candidate outlived the server"
    row = rig.row("op-in-flight")
    assert row is not None and (row.state, row.outcome) == ("done", "failure")
    assert row.result is not None and b'"CANCELLED"' in row.result
    assert row.cgroup_job not in set(rig.backend.list_jobs())
    assert "coordinator lost" in server.stderr()
    rig.assert_nothing_left()


def test_sigterm_fences_the_run_in_flight_before_the_server_exits(rig: Rig) -> None:
    """SIGTERM mid-run: exit 0, the candidate and its job already gone, answered CANCELLED."""
    token = f"tok-{uuid.uuid4().hex}"
    server = _in_flight(rig, token)
    assert server.terminate() == 0
    _assert_fenced_by_exit(rig, server, token)


def test_sighup_is_coordinator_loss_like_sigterm(rig: Rig) -> None:
    """SIGHUP mid-run (the terminal gone): fenced and answered CANCELLED, exit 0, not death."""
    token = f"tok-{uuid.uuid4().hex}"
    server = _in_flight(rig, token)
    server.process.send_signal(signal.SIGHUP)
    assert server.wait_exit(server.timeout) == 0
    _assert_fenced_by_exit(rig, server, token)


def _pipe_into_serve(rig: Rig, frames: list[dict[str, Any]]) -> dict[object, dict[str, Any]]:
    """`jigcmd serve … < requests.jsonl > answers.jsonl` in a shell, as the README shows it."""
    requests = rig.tmp / "requests.jsonl"
    answers = rig.tmp / "answers.jsonl"
    requests.write_text("".join(json.dumps(frame) + "\n" for frame in frames))
    argv = [sys.executable, "-m", "jigcmd", "serve", "--binding", str(rig.binding)]
    serve = shlex.join([*argv, "--state-dir", str(rig.state_dir)])
    done = subprocess.run(
        ["/bin/sh", "-c", f"{serve} < {shlex.quote(str(requests))} > {shlex.quote(str(answers))}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return {a["id"]: a for a in map(json.loads, answers.read_text().splitlines())}


def test_a_file_of_flow_requests_piped_into_serve_gets_every_answer(rig: Rig) -> None:
    """ping, a real call, its join, an unknown method and bad params: all answered, exit 0."""
    token = f"tok-{uuid.uuid4().hex}"
    call = flow_call("call-1", "op-piped", cli_input(QUICK, token))
    bad = flow_call("call-bad", "op-bad", cli_input(QUICK, token))
    del bad["params"]["slot"]
    answers = _pipe_into_serve(
        rig,
        [
            {"jsonrpc": "2.0", "id": "ready", "method": "ping"},
            call,
            {**call, "id": "call-2"},
            {"jsonrpc": "2.0", "id": "nope", "method": "tools/list"},
            bad,
        ],
    )
    assert set(answers) == {"ready", "call-1", "call-2", "nope", "call-bad"}
    evidence = answers["call-1"]["result"]["value"]
    assert (evidence["exitCode"], evidence["stdout"]["text"]) == (0, f"ran {token}\n")
    assert answers["call-2"]["result"] == answers["call-1"]["result"]
    assert answers["nope"]["error"]["code"] == -32601
    assert answers["call-bad"]["error"]["code"] == -32602
    rig.assert_nothing_left()


def test_a_file_of_mcp_requests_piped_into_serve_gets_every_answer(rig: Rig) -> None:
    """initialize, tools/list and a tools/call from a file: each answered, the call completed."""
    token = f"tok-{uuid.uuid4().hex}"
    answers = _pipe_into_serve(
        rig,
        [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "a-file", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {
                    "name": "cli",
                    "arguments": {"files": {"src/cli.ts": QUICK}, "args": [token]},
                },
            },
        ],
    )
    assert set(answers) == {1, 2, 3}
    result = answers[3]["result"]
    assert result["isError"] is False, result
    assert result["structuredContent"]["stdout"]["head"] == f"ran {token}\n"
    rig.assert_nothing_left()
