"""MCP 2026-07-28 and the handshake era on one real `jigcmd serve`, every call in the journal.

Driven the way hosts drive it: the official Python SDK (2.3, dual-era) in each of its modes,
Claude Code's discover → initialize → call sequence in raw frames, and a kill -9 of the
server during four parallel calls, after which `jigcmd runs` lists them, `jigcmd recover`
fences them, nothing runs again, and a task created before the kill is answered by a new
server on the same state directory and run id.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import CallToolResult

from jigcmd.frontends.runs import list_runs
from jigcmd.frontends.servechild import ServeChild
from jigcmd.journal.identity import identify
from jigcmd.journal.rows import Row
from tests.admitted_example import EXAMPLE, admit_example

pytestmark = pytest.mark.envelope

MODERN = "2026-07-28"
TASKS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
_QUICK = 'console.log("ran " + process.argv[2]);\n'
# Busy (no timer can end it early) for the given milliseconds, then prints its token.
_HOLD = (
    "const end = Date.now() + Number(process.argv[3]);\n"
    "while (Date.now() < end) {}\n"
    'console.log("held " + process.argv[2]);\n'
)


def candidate(name: str) -> dict[str, str]:
    """One of the example's candidates as a call's `files`."""
    root = EXAMPLE / "candidates" / name
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    """The example, admitted in a temporary copy."""
    return admit_example(tmp_path)


def serve_args(binding: Path, state: Path, *extra: str) -> list[str]:
    return ["-m", "jigcmd", "serve", "--binding", str(binding), "--state-dir", str(state), *extra]


def meta(capabilities: dict[str, Any] | None = None, **extra: object) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        **extra,
    }


def cli_call(token: str, source: str = _QUICK, *args: str, **call_meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "name": "cli",
        "arguments": {"files": {"src/cli.ts": source}, "args": [token, *args]},
    }
    if call_meta:
        params["_meta"] = call_meta
    return params


def jigcmd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args], capture_output=True, text=True, check=False
    )


def runs_json(state: Path) -> dict[str, list[dict[str, Any]]]:
    listed = jigcmd("runs", "--state-dir", str(state), "--json")
    assert listed.returncode == 0, listed.stderr
    runs = [json.loads(line) for line in listed.stdout.splitlines()]
    return {run["runId"]: run["operations"] for run in runs}


def ended_task(server: ServeChild, task: dict[str, Any]) -> dict[str, Any]:
    """`tasks/get` polled (at the interval it asks for) until the task is no longer working."""
    deadline = time.monotonic() + 30
    while (got := server.request("tasks/get", task)["result"])["status"] == "working":
        assert time.monotonic() < deadline, got
        time.sleep(got.get("pollIntervalMs", 200) / 1000)
    result: dict[str, Any] = got
    return result


def wait_rows(state: Path, ready: Any, timeout: float = 30.0) -> list[Row]:
    """Poll the journal (read only) until `ready(rows)`."""
    deadline = time.monotonic() + timeout
    while True:
        rows = list_runs(state)
        if ready(rows):
            return rows
        assert time.monotonic() < deadline, [(r.operation_id, r.state) for r in rows]
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("mode", "version"), [("auto", MODERN), (MODERN, MODERN), ("legacy", "2025-11-25")]
)
async def test_the_sdk_in_each_mode_connects_lists_calls_four_in_parallel_and_cancels(
    binding: Path, tmp_path: Path, mode: str, version: str
) -> None:
    """mcp 2.3: auto (discover), the modern pin (no probe at all) and legacy (initialize)."""
    state = tmp_path / "state"
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_args(binding, state, "--max-envelopes", "4", "--run-id", "run-sdk"),
    )
    tokens = [f"tok-{uuid.uuid4().hex[:8]}" for _ in range(4)]
    results: dict[str, CallToolResult] = {}
    with tempfile.TemporaryFile(mode="w+") as errlog:
        async with Client(params, mode=mode, read_timeout_seconds=60) as client:
            assert client.protocol_version == version
            listed = await client.list_tools()
            assert [tool.name for tool in listed.tools] == ["tests", "cli"]

            async def call(token: str) -> None:
                result = await client.call_tool(
                    "cli", {"files": {"src/cli.ts": _QUICK}, "args": [token]}
                )
                assert isinstance(result, CallToolResult)
                results[token] = result

            async with anyio.create_task_group() as calls:
                for token in tokens:
                    calls.start_soon(call, token)
            with anyio.move_on_after(4):
                await client.call_tool(
                    "cli", {"files": {"src/cli.ts": _HOLD}, "args": ["cancelled", "9000"]}
                )
                pytest.fail("the held call should have been cancelled")
        errlog.seek(0)
        assert "Traceback" not in errlog.read()
    for token in tokens:
        result = results[token]
        assert result.is_error is False, result.content
        assert result.structured_content is not None
        assert result.structured_content["stdout"]["head"] == f"ran {token}\n"
        report_key = "dev.jigcmd/report" if version == MODERN else "jigcmd/report"
        assert result.meta is not None and report_key in result.meta
    # Every call is its own operation of the run; the cancelled one ended CANCELLED.
    rows = wait_rows(state, lambda rows: len(rows) == 5 and not any(r.is_open for r in rows))
    assert len({row.operation_id for row in rows}) == 5
    assert {row.root_run for row in rows} == {"run-sdk"}
    endings = sorted(op["ending"] for op in runs_json(state)["run-sdk"])
    assert endings == ["CANCELLED", "evidence", "evidence", "evidence", "evidence"]


def test_claude_codes_sequence_discover_then_initialize_then_calls(
    binding: Path, tmp_path: Path
) -> None:
    """A successful discover does not fix the era: initialize, list and call follow."""
    args = ["--state-dir", str(tmp_path / "state"), "--run-id", "run-cc"]
    with ServeChild(binding, args) as server:
        found = server.request("server/discover", {"_meta": meta()})["result"]
        assert found["supportedVersions"] == [MODERN]
        assert found["capabilities"]["extensions"] == TASKS["extensions"]
        init = server.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "cc", "version": "2"},
            },
        )["result"]
        assert init["protocolVersion"] == "2025-11-25"
        server.notify("notifications/initialized", None)
        listed = server.request("tools/list", {})["result"]
        assert [tool["name"] for tool in listed["tools"]] == ["tests", "cli"]
        ran = server.request("tools/call", cli_call("cc-1"))["result"]
        assert ran["structuredContent"]["stdout"]["head"] == "ran cc-1\n"
        assert "resultType" not in ran and "jigcmd/report" in ran["_meta"]
        # The same process serves a per-request call beside it, and discover again.
        modern = server.request("tools/call", cli_call("cc-2", **meta()))["result"]
        assert modern["resultType"] == "complete"
        assert modern["structuredContent"]["stdout"]["head"] == "ran cc-2\n"
        assert server.request("server/discover", {"_meta": meta()})["result"] == found
        assert server.close_input() == 0


def test_the_per_request_era_frame_by_frame(binding: Path, tmp_path: Path) -> None:
    """Every rule of item 1 on the real server, in raw frames (see docs/mcp-eras.md)."""
    args = ["--state-dir", str(tmp_path / "state"), "--run-id", "run-raw"]
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with ServeChild(binding, args) as server:
        listed = server.request("tools/list", {"_meta": meta()})["result"]
        assert (listed["resultType"], listed["cacheScope"]) == ("complete", "private")
        assert listed["ttlMs"] > 0
        assert listed["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "jigcmd"
        again = server.request("tools/list", {"_meta": meta()})["result"]
        assert [t["name"] for t in again["tools"]] == [t["name"] for t in listed["tools"]]
        # Now modern: initialize is -32022 naming the versions; ping does not exist.
        refused = server.request(
            "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}
        )
        assert refused["error"]["code"] == -32022
        assert refused["error"]["data"] == {"supported": [MODERN], "requested": "2025-11-25"}
        assert server.request("ping", {"_meta": meta()})["error"]["code"] == -32601
        assert (
            server.request("logging/setLevel", {"level": "info", "_meta": meta()})["error"]["code"]
            == -32601
        )
        # Checked per request, never inferred.
        no_version: dict[str, Any] = {"io.modelcontextprotocol/clientCapabilities": {}}
        assert server.request("tools/list", {"_meta": no_version})["error"]["code"] == -32602
        assert server.request("tools/list", {})["error"]["code"] == -32602
        bad = server.request(
            "tools/list",
            {"_meta": meta() | {"io.modelcontextprotocol/protocolVersion": "2030-01-01"}},
        )
        assert bad["error"]["data"] == {"supported": [MODERN], "requested": "2030-01-01"}
        # A call: stamped, trace context handed back, its own operation in the journal.
        ran = server.request(
            "tools/call", cli_call("raw-1", **meta(traceparent=parent, tracestate="k=v"))
        )["result"]
        assert ran["resultType"] == "complete"
        assert ran["_meta"]["traceparent"] == parent and ran["_meta"]["tracestate"] == "k=v"
        assert "dev.jigcmd/report" in ran["_meta"]
        assert ran["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "jigcmd"
        # A resource that is not there (another run's) is -32602: the revision has no -32002.
        other = ran["structuredContent"]["stdout"]["uri"].replace("/run-raw/", "/run-other/")
        missing = server.request("resources/read", {"uri": other, "_meta": meta()})["error"]
        assert missing["code"] == -32602 and "another run" in missing["message"]
        # Every read and list is a CacheableResult (SEP-2549: `ttlMs`, `cacheScope` required).
        uri = ran["structuredContent"]["stdout"]["uri"]
        read = server.request("resources/read", {"uri": uri, "_meta": meta()})["result"]
        assert read["contents"][0]["uri"] == uri and read["resultType"] == "complete"
        assert (read["ttlMs"], read["cacheScope"]) == (86_400_000, "private")
        resources = server.request("resources/list", {"_meta": meta()})["result"]
        templates = server.request("resources/templates/list", {"_meta": meta()})["result"]
        for listed in (resources, templates):
            assert (listed["ttlMs"], listed["cacheScope"]) == (60_000, "private")
        (template,) = templates["resourceTemplates"]
        assert template["uriTemplate"] == "jigcmd://run/{run}/{operation}/{name}"
        # Only what the tool's inputSchema allows: `args: []` on a test tool is refused.
        files = {"test/project.test.ts": ""}
        extra = {"name": "tests", "arguments": {"files": files, "args": []}, "_meta": meta()}
        refused = server.request("tools/call", extra)["result"]
        assert refused["isError"] is True
        assert refused["_meta"]["dev.jigcmd/error"]["details"]["rule"] == "input-keys"
        assert "(tool 'tests' takes files, stdin)" in refused["content"][0]["text"]
        assert server.close_input() == 0
        # Nothing but answers: no notifications/message, no request from the server.
        for line in server.lines:
            message = json.loads(line)
            assert "id" in message and "method" not in message, message
    (row,) = list_runs(tmp_path / "state")
    assert (row.root_run, row.state) == ("run-raw", "done")
    # The trace context is kept with the run: in the journal, and in the run's report.
    (listed_op,) = runs_json(tmp_path / "state")["run-raw"]
    assert listed_op["trace"] == {"traceparent": parent, "tracestate": "k=v"}
    assert ran["_meta"]["dev.jigcmd/report"]["trace"] == listed_op["trace"]


def test_params_that_are_not_an_object_are_named_so_in_either_era(
    binding: Path, tmp_path: Path
) -> None:
    """An array holds no `_meta`: the per-request era names its shape, as the handshake era."""
    with ServeChild(binding, ["--state-dir", str(tmp_path / "handshake")]) as server:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}}
        assert "result" in server.request("initialize", hello)
        refused = server.request("tools/call", [1])["error"]
        assert refused == {
            "code": -32602,
            "message": "Invalid params: tools/call params must be an object",
        }
        assert server.close_input() == 0
    with ServeChild(binding, ["--state-dir", str(tmp_path / "per-request")]) as server:
        assert "result" in server.request("tools/list", {"_meta": meta()})
        for method in ("tools/call", "tools/list", "resources/read", "server/discover"):
            refused = server.request(method, [1])["error"]
            assert refused == {
                "code": -32602,
                "message": f"Invalid params: {method} params must be an object",
            }
        # An object without the envelope is still told what it misses; ping does not exist.
        missing = server.request("tools/call", cli_call("x"))["error"]
        assert missing["code"] == -32602
        assert "are required on every request of MCP 2026-07-28" in missing["message"]
        assert server.request("ping", [1])["error"]["code"] == -32601
        assert server.close_input() == 0


def test_a_task_is_created_once_recorded_and_answered_by_tasks_get(
    binding: Path, tmp_path: Path
) -> None:
    args = ["--state-dir", str(tmp_path / "state"), "--run-id", "run-task"]
    with ServeChild(binding, args) as server:
        created = server.request("tools/call", cli_call("task-1", **meta(TASKS)))["result"]
        assert (created["resultType"], created["status"]) == ("task", "working")
        task_id = created["taskId"]
        # Created only once the journal holds it: its row is there now.
        (row,) = list_runs(tmp_path / "state")
        assert row.operation_id == task_id and row.root_run == "run-task"
        deadline = time.monotonic() + 30
        while True:
            got = server.request("tasks/get", {"taskId": task_id, "_meta": meta(TASKS)})["result"]
            if got["status"] != "working":
                break
            assert time.monotonic() < deadline
            time.sleep(got["pollIntervalMs"] / 1000)
        assert got["status"] == "completed"
        assert got["result"]["structuredContent"]["stdout"]["head"] == "ran task-1\n"
        no_ext = server.request("tasks/get", {"taskId": task_id, "_meta": meta()})
        assert no_ext["error"]["code"] == -32021
        assert server.close_input() == 0


@contextlib.contextmanager
def supervisors_stopped(rows: list[Row], stop: bool) -> Iterator[None]:
    """With `stop`, SIGSTOP the runs' own supervisors (checked by identity) until the block ends.

    A stopped supervisor cannot fence its run when the server dies, so recovery must; SIGCONT
    afterwards lets any that recovery did not kill fence their own run.
    """
    stopped = []
    if stop:
        for row in rows:
            assert row.supervisor is not None
            if identify(row.supervisor.pid) == row.supervisor:
                os.kill(row.supervisor.pid, signal.SIGSTOP)
                stopped.append(row.supervisor)
    try:
        yield
    finally:
        for supervisor in stopped:
            if identify(supervisor.pid) == supervisor:
                os.kill(supervisor.pid, signal.SIGCONT)


@pytest.mark.parametrize("stop", [False, True], ids=["supervisors-fence", "recover-fences"])
def test_kill_9_during_four_parallel_calls_fences_them_and_nothing_runs_again(
    binding: Path, tmp_path: Path, stop: bool
) -> None:
    """runs lists each, recover fences each, a new server answers the task and the keyed retry.

    Each run's supervisor fences it as soon as the server is gone; with the supervisors
    stopped, `jigcmd recover` does (it kills them, empties and removes the runs' jobs).
    """
    state = tmp_path / "state"
    args = ["--state-dir", str(state), "--run-id", "run-crash", "--max-envelopes", "4"]
    with ServeChild(binding, args) as server:
        server.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": cli_call("a", _HOLD, "8000", **meta()),
            },
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": cli_call("b", _HOLD, "8000", **meta()),
            },
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": cli_call(
                    "c", _HOLD, "8000", **meta({}, **{"dev.jigcmd/operationId": "wf-9/act-1"})
                ),
            },
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": cli_call("d", _HOLD, "8000", **meta(TASKS)),
            },
        )
        task_id = server.answer(4)["result"]["taskId"]
        running = wait_rows(
            state, lambda rows: len(rows) == 4 and all(r.state == "running" for r in rows)
        )
        with supervisors_stopped(running, stop):
            server.kill()
            listed = runs_json(state)["run-crash"]
            # Each is listed: still running, or already closed by its own supervisor.
            assert len(listed) == 4
            assert all(op["state"] in ("running", "uncertain") for op in listed)
            if stop:
                assert all(op["state"] == "running" for op in listed)
            assert {"wf-9/act-1", task_id} <= {op["operationId"] for op in listed}
            recovered = jigcmd("recover", "--state-dir", str(state))
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    if stop:
        assert recovered.stdout.count("as uncertain: cleanup complete") == 4, recovered.stdout
    fenced = runs_json(state)["run-crash"]
    assert all((op["state"], op["cleanup"]) == ("uncertain", "complete") for op in fenced)
    envelopes = {op["operationId"]: op["envelope"] for op in fenced}
    with ServeChild(binding, args) as server:
        got = server.request("tasks/get", {"taskId": task_id, "_meta": meta(TASKS)})["result"]
        assert got["status"] == "completed"
        assert got["result"]["isError"] is True
        assert got["statusMessage"].startswith("UNCERTAIN")
        retried = server.request(
            "tools/call",
            cli_call("c", _HOLD, "8000", **meta({}, **{"dev.jigcmd/operationId": "wf-9/act-1"})),
        )["result"]
        assert retried["isError"] is True
        assert retried["_meta"]["dev.jigcmd/error"]["code"] == "UNCERTAIN"
        assert server.close_input() == 0
    after = runs_json(state)["run-crash"]
    # Nothing ran again: the same four operations, the same envelopes, still uncertain.
    assert {op["operationId"]: op["envelope"] for op in after} == envelopes
    assert all(op["state"] == "uncertain" for op in after)


def test_an_engine_retry_maps_to_run_id_and_operation_id_and_replays(
    binding: Path, tmp_path: Path
) -> None:
    """A Temporal activity retried after its worker restarts: workflow → run, activity → key."""
    state = tmp_path / "state"
    workflow_id, activity_id = "wf-orders-42", "activity-7"
    args = ["--state-dir", str(state), "--run-id", f"temporal:{workflow_id}"]
    call = cli_call("once", **{"dev.jigcmd/operationId": activity_id})
    with ServeChild(binding, args) as first:
        first.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
        ran = first.request("tools/call", call)["result"]
        assert first.close_input() == 0
    with ServeChild(binding, args) as retry:
        retry.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
        replayed = retry.request("tools/call", call)["result"]
        assert retry.close_input() == 0
    assert replayed["structuredContent"] == ran["structuredContent"]
    (only,) = runs_json(state)[f"temporal:{workflow_id}"]
    assert (only["operationId"], only["ending"]) == (activity_id, "evidence")


def test_a_keyed_retry_of_a_test_command_replays_its_per_test_results(
    binding: Path, tmp_path: Path
) -> None:
    """The same answer, tests and JUnit link included, from the same server and after a restart."""
    args = ["--state-dir", str(tmp_path / "state"), "--run-id", "run-tests-replay"]
    call = {
        "name": "tests",
        "arguments": {"files": candidate("failing")},
        "_meta": meta({}, **{"dev.jigcmd/operationId": "tests-1"}),
    }
    with ServeChild(binding, args) as server:
        first = server.request("tools/call", call)["result"]
        again = server.request("tools/call", call)["result"]
        assert server.close_input() == 0
    with ServeChild(binding, args) as restarted:
        replayed = restarted.request("tools/call", call)["result"]
        assert restarted.close_input() == 0
    tests = first["structuredContent"]["tests"]
    assert tests["summary"]["failed"] == 1 and tests["uri"].endswith("/tests-1/junit")
    assert "Tests: 1 run: 0 passed, 1 failed" in first["content"][0]["text"]
    assert again == first
    assert replayed == first


def test_a_test_commands_task_is_answered_after_a_restart_with_its_per_test_results(
    binding: Path, tmp_path: Path
) -> None:
    """`tasks/get` from the journal gives the result the task completed with, tests included."""
    args = ["--state-dir", str(tmp_path / "state"), "--run-id", "run-tests-task"]
    call = {"name": "tests", "arguments": {"files": candidate("failing")}, "_meta": meta(TASKS)}
    got, answered = _task_and_restart(binding, args, call)
    assert got["result"]["structuredContent"]["tests"]["summary"]["failed"] == 1
    assert answered["result"] == got["result"]


def _task_and_restart(
    binding: Path, args: list[str], call: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`call` as a task polled to its end, then `tasks/get` of it from a new server on the same
    state directory and run id: (the ended task, the restarted server's answer)."""
    with ServeChild(binding, args) as server:
        task = {"taskId": server.request("tools/call", call)["result"]["taskId"]}
        task["_meta"] = meta(TASKS)
        got = ended_task(server, task)
        assert server.close_input() == 0
    with ServeChild(binding, args) as restarted:
        answered: dict[str, Any] = restarted.request("tasks/get", task)["result"]
        assert restarted.close_input() == 0
    return got, answered


def test_a_tasks_notes_are_answered_after_a_restart(binding: Path, tmp_path: Path) -> None:
    """The notes a task completed with come back from the journal with its result: a new
    server has no request to make them from."""
    args = ["--state-dir", str(tmp_path / "state"), "--run-id", "run-notes-task"]
    files = candidate("failing") | {
        "bunfig.toml": '[test]\npreload = ["./test/setup.ts"]\n',
        "test/setup.ts": "globalThis.ready = true;\n",
    }
    call = {"name": "tests", "arguments": {"files": files}, "_meta": meta(TASKS)}
    got, answered = _task_and_restart(binding, args, call)
    (note,) = got["result"]["structuredContent"]["notes"]
    assert note.startswith("bunfig.toml: Bun runs without it"), note
    assert answered["result"]["structuredContent"]["notes"] == [note]
    assert answered["result"] == got["result"]


def test_an_mcp_call_with_a_key_belongs_to_its_live_waiters(binding: Path, tmp_path: Path) -> None:
    """Two calls under one key share one run; cancelling the first leaves it to the second."""
    state = tmp_path / "state"
    args = ["--state-dir", str(state), "--run-id", "run-join"]
    keyed = meta({}, **{"dev.jigcmd/operationId": "shared-1"})
    with ServeChild(binding, args) as server:
        server.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": cli_call("j", _HOLD, "3000", **keyed),
            },
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": cli_call("j", _HOLD, "3000", **keyed),
            },
        )
        wait_rows(state, lambda rows: len(rows) == 1 and rows[0].state == "running")
        server.notify("notifications/cancelled", {"requestId": 1, "reason": "the user moved on"})
        joined = server.answer(2)["result"]
        assert joined["isError"] is False, joined
        assert joined["structuredContent"]["stdout"]["head"] == "held j\n"
        assert server.close_input() == 0
        # The cancelled request is not answered; the other one got the run's evidence.
        assert not server.answered(1)
    (row,) = list_runs(state)
    assert (row.operation_id, row.state, row.outcome) == ("shared-1", "done", "evidence")


def test_a_task_is_bound_to_the_run_that_created_it(binding: Path, tmp_path: Path) -> None:
    """Another run on the same state directory cannot read it: not found, nothing leaks; its
    own run reads it back after a restart, created and last updated at the same instants."""
    state = tmp_path / "state"
    task: dict[str, object] = {}
    with ServeChild(binding, ["--state-dir", str(state), "--run-id", "run-a"]) as server:
        created = server.request("tools/call", cli_call("mine", **meta(TASKS)))["result"]
        task = {"taskId": created["taskId"], "_meta": meta(TASKS)}
        live = ended_task(server, task)
        assert server.close_input() == 0
    with ServeChild(binding, ["--state-dir", str(state), "--run-id", "run-b"]) as other:
        refused = other.request("tasks/get", task)["error"]
        assert refused["code"] == -32602 and "no such task in this run" in refused["message"]
        assert other.request("tasks/cancel", task)["error"]["code"] == -32602
        assert other.close_input() == 0
    with ServeChild(binding, ["--state-dir", str(state), "--run-id", "run-a"]) as again:
        got = again.request("tasks/get", task)["result"]
        assert got["status"] == "completed"
        # The instants the journal holds, live and read back from its row alike.
        assert got["createdAt"] == created["createdAt"]
        assert got["lastUpdatedAt"] == live["lastUpdatedAt"], (got, live)
        assert got["result"]["structuredContent"]["stdout"]["head"] == "ran mine\n"
        assert again.close_input() == 0


def test_the_sdk_clients_shutdown_end_of_input_then_sigterm_after_two_seconds(
    binding: Path, tmp_path: Path
) -> None:
    """What the SDKs do on close (stdin closed, 2 s, SIGTERM): the run is fenced and recorded."""
    state = tmp_path / "state"
    with ServeChild(binding, ["--state-dir", str(state), "--run-id", "run-shut"]) as server:
        server.request("tools/list", {"_meta": meta()})
        server.send(
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "tools/call",
                "params": cli_call("long", _HOLD, "9000", **meta()),
            }
        )
        wait_rows(state, lambda rows: len(rows) == 1 and rows[0].state == "running")
        assert server.process.stdin is not None
        server.process.stdin.close()
        time.sleep(2.0)
        # End of input alone lets the call run to its end; the SDK's SIGTERM fences it.
        assert server.process.poll() is None
        assert server.terminate() == 0
    (row,) = wait_rows(state, lambda rows: len(rows) == 1 and not rows[0].is_open, timeout=10)
    assert (row.state, row.outcome, row.cleanup) == ("done", "failure", "complete")
    (listed,) = runs_json(state)["run-shut"]
    assert listed["ending"] == "CANCELLED"


def test_tasks_cancel_of_a_task_another_server_runs_is_refused_not_acknowledged(
    binding: Path, tmp_path: Path
) -> None:
    """Two servers of one run: the one that does not run the task cannot stop it, and says
    so instead of acknowledging a cancel that stops nothing; the task runs to its end."""
    state = tmp_path / "state"
    args = ["--state-dir", str(state), "--run-id", "run-cancel-elsewhere"]
    with ServeChild(binding, args) as owner, ServeChild(binding, args) as other:
        created = owner.request("tools/call", cli_call("e", _HOLD, "2000", **meta(TASKS)))
        task = {"taskId": created["result"]["taskId"], "_meta": meta(TASKS)}
        wait_rows(state, lambda rows: len(rows) == 1 and rows[0].state == "running")
        refused = other.request("tasks/cancel", task)["error"]
        assert refused["code"] == -32602, refused
        assert "which alone can stop it" in refused["message"]
        assert refused["message"].endswith("nothing was cancelled")
        got = ended_task(owner, task)
        assert got["status"] == "completed", got
        assert other.request("tasks/cancel", task)["result"]["resultType"] == "complete"
        assert owner.close_input() == 0 and other.close_input() == 0


def test_tasks_cancel_stops_the_run_and_the_task_ends_cancelled(
    binding: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    with ServeChild(binding, ["--state-dir", str(state), "--run-id", "run-cancel"]) as server:
        created = server.request("tools/call", cli_call("c", _HOLD, "9000", **meta(TASKS)))
        task = {"taskId": created["result"]["taskId"], "_meta": meta(TASKS)}
        wait_rows(state, lambda rows: len(rows) == 1 and rows[0].state == "running")
        acked = server.request("tasks/cancel", task)["result"]
        assert acked["resultType"] == "complete"
        got = ended_task(server, task)
        assert got["status"] == "cancelled"
        assert got["statusMessage"].startswith("CANCELLED")
        assert server.close_input() == 0
    (listed,) = runs_json(state)["run-cancel"]
    assert (listed["ending"], listed["cleanup"]) == ("CANCELLED", "complete")
