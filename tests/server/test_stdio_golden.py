"""Golden JSON-RPC edge cases against the real server process over pipes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jigcmd.protocol.framing import MAX_FRAME_BYTES
from tests.server.wire_process import FAILSAFE_S, FAKE_SERVER, ServerProcess, server_env

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    process = ServerProcess()
    yield process
    process.stop()


def ping(server: ServerProcess, request_id: str = "alive") -> dict[str, Any]:
    return server.request({"jsonrpc": "2.0", "id": request_id, "method": "ping"})


def flow_call(request_id: str, operation_id: str, stdin: str = "") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "capability/call",
        "params": {
            "operationId": operation_id,
            "slot": "command",
            "method": "run",
            "input": {"command": "tests", "files": {"test/a.test.ts": "x"}, "stdin": stdin},
        },
    }


@pytest.mark.parametrize(
    ("frame", "message", "request_id"),
    [
        (b"not json", "Parse error: malformed JSON", None),
        (b'{"jsonrpc":"2.0","id":7,"method":', "Parse error: malformed JSON", None),
        (
            b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}',
            "Parse error: byte order mark",
            1,
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"p\xffng"}',
            "Parse error: invalid UTF-8 at byte 35",
            1,
        ),
        # Which "id" is meant is the question: none is named.
        (
            b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
            'Parse error: duplicate key "id"',
            None,
        ),
        (
            b'{"jsonrpc":"2.0","id":"n","method":"ping","params":{"x":NaN}}',
            "Parse error: NaN and Infinity",
            "n",
        ),
        (
            b'{"jsonrpc":"2.0","id":9007199254740992,"method":"ping"}',
            "Parse error: integer 9007199254740992",
            None,
        ),
        (b'{"jsonrpc":"2.0","id":"\\udc00","method":"ping"}', "Parse error: lone surrogate", None),
        # The id last and past the first 64 KiB, as the TypeScript SDK writes a large call.
        pytest.param(
            b'{"method":"ping","params":{"pad":"' + b"x" * 70_000 + b'","x":NaN},'
            b'"jsonrpc":"2.0","id":"sdk"}',
            "Parse error: NaN and Infinity",
            "sdk",
            id="id-last-past-64KiB",
        ),
        (
            b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"\\ud83d"}}',
            "Parse error: lone surrogate escape \\ud83d at '/params/x'",
            3,
        ),
        # A repeated key anywhere but "id" leaves the id known: the client's call settles.
        (
            b'{"jsonrpc":"2.0","id":"k","method":"ping","params":{"x":1,"x":2}}',
            "Parse error: duplicate key \"x\" at '/params/x'",
            "k",
        ),
        (
            b'{"jsonrpc":"2.0","id":5,"method":"ping","method":"ping"}',
            "Parse error: duplicate key \"method\" at '/method'",
            5,
        ),
    ],
)
def test_frames_that_are_not_strict_json_get_a_parse_error_and_the_session_continues(
    server: ServerProcess, frame: bytes, message: str, request_id: object
) -> None:
    """-32700 with the rule that failed, and the request's id unless the text is not JSON's
    syntax or the id itself breaks a rule; the next request is served."""
    server.send(frame + b"\n")
    error = server.read()
    assert error["id"] == request_id
    assert error["error"]["code"] == -32700
    assert error["error"]["message"].startswith(message)
    assert ping(server)["result"] == {}


@pytest.mark.parametrize(
    "frame",
    [b"42", b'"ping"', b"null", b"{}", b'{"jsonrpc":"2.0"}', b'{"jsonrpc":"1.0","method":"ping"}'],
)
def test_json_that_is_not_a_request_gets_invalid_request(
    server: ServerProcess, frame: bytes
) -> None:
    """Any JSON that is not a request or notification is answered -32600, id null."""
    server.send(frame + b"\n")
    error = server.read()
    assert (error["id"], error["error"]["code"]) == (None, -32600)


def test_a_batch_gets_exactly_one_invalid_request(server: ServerProcess) -> None:
    """A top-level array is one -32600, not one answer per element."""
    server.send(
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]\n'
    )
    error = server.read()
    assert error["error"] == {
        "code": -32600,
        "message": "Invalid Request: batches are not supported",
    }
    assert ping(server)["id"] == "alive"


def test_notifications_are_never_answered(server: ServerProcess) -> None:
    """Known and unknown notifications produce no output; the next line answers the ping."""
    server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    server.send(b'{"jsonrpc":"2.0","method":"whatever","params":{}}\n')
    server.send(b'{"jsonrpc":"2.0","method":"request/cancel","params":{"requestId":"x"}}\n')
    assert ping(server)["id"] == "alive"


def test_an_oversized_frame_is_refused_and_the_session_continues(server: ServerProcess) -> None:
    """A frame over 16 MiB gets -32600 with its id (in its first 64 KiB); framing resumes
    after its LF."""
    server.send(
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"'
        + b"x" * MAX_FRAME_BYTES
        + b'"}}\n'
    )
    error = server.read()
    assert (error["id"], error["error"]["code"]) == (1, -32600)
    assert "exceeds the limit of 16,777,216 bytes" in error["error"]["message"]
    assert ping(server)["id"] == "alive"


def test_crlf_terminated_frames_are_served(server: ServerProcess) -> None:
    """A CR before the LF is JSON whitespace, so the frame is valid."""
    server.send(b'{"jsonrpc":"2.0","id":"crlf","method":"ping"}\r\n')
    assert server.read() == {"jsonrpc": "2.0", "id": "crlf", "result": {}}


def test_stray_output_of_the_service_and_its_children_never_reaches_the_wire(
    server: ServerProcess,
) -> None:
    """print() and a child writing to fd 1 land on stderr; stdout carries only the answer."""
    server.request(INIT)
    result = server.request(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "cli", "arguments": {"files": {"a.ts": "x"}, "stdin": "stray"}},
        }
    )
    assert result["result"]["isError"] is False
    assert ping(server)["id"] == "alive"
    server.close_stdin()
    assert server.read_line() == b""
    assert server.wait() == 0
    assert b"stray output from the service" in server.stderr
    assert b"stray output from a child" in server.stderr


def test_run1_calls_succeed_conflict_and_are_exhausted_over_the_wire(server: ServerProcess) -> None:
    """A Flow session: success value, concurrent refusal, conflicting reuse, cancellation."""
    assert set(server.request(flow_call("r1", "op-1"))["result"]) == {"value"}
    server.send_json(flow_call("r2", "op-2", stdin="wait"))
    busy = server.request(flow_call("r3", "op-3"))
    assert busy["error"]["data"] == {"code": "RESOURCE_EXHAUSTED"}
    conflict = server.request(flow_call("r4", "op-1", stdin="other"))
    assert conflict["error"]["data"] == {"code": "OPERATION_CONFLICT"}
    server.send_json({"jsonrpc": "2.0", "method": "request/cancel", "params": {"requestId": "r2"}})
    cancelled = server.read()
    assert cancelled["id"] == "r2"
    assert cancelled["error"]["data"]["code"] == "CANCELLED"
    assert cancelled["error"]["data"]["details"]["command"]["stopReason"] == "cancelled"


def test_a_backend_bug_is_answered_uncertain_and_the_session_continues(
    server: ServerProcess,
) -> None:
    """An unexpected exception in the service is UNCERTAIN, never a crash."""
    answer = server.request(flow_call("r1", "op-1", stdin="boom"))
    assert answer["error"]["data"] == {"code": "UNCERTAIN"}
    assert ping(server)["id"] == "alive"


def test_mcp_progress_and_cancellation_over_the_wire(server: ServerProcess) -> None:
    """Progress arrives for a token; after notifications/cancelled no response comes."""
    server.request(INIT)
    server.send_json(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {
                "name": "cli",
                "arguments": {"files": {"a.ts": "x"}, "stdin": "wait"},
                "_meta": {"progressToken": "t"},
            },
        }
    )
    progress = server.read()
    assert progress["method"] == "notifications/progress"
    assert progress["params"]["progressToken"] == "t"
    server.send_json(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    )
    assert ping(server)["id"] == "alive"
    server.close_stdin()
    assert server.read_line() == b""
    assert server.wait() == 0


def test_end_of_input_lets_the_running_call_reach_its_own_end_then_exits(
    server: ServerProcess,
) -> None:
    """EOF: the call already read is not cancelled; it ends by its deadline, is answered, exit 0."""
    deadline = time.time_ns() // 1_000_000 + 300
    call = flow_call("r1", "op-1", stdin="wait")
    call["params"]["deadlineUnixMs"] = deadline
    server.send_json(call)
    assert ping(server)["id"] == "alive"
    server.close_stdin()
    answer = server.read()
    assert answer["error"]["data"]["code"] == "DEADLINE_EXCEEDED"
    assert server.read_line() == b""
    assert server.wait() == 0


def test_end_of_input_answers_every_call_in_a_piped_file(tmp_path: Path) -> None:
    """A file of requests on stdin: every call in it is completed and answered, then exit 0."""
    frames = [
        {"jsonrpc": "2.0", "id": "p", "method": "ping"},
        flow_call("r1", "op-1"),
        flow_call("r2", "op-1"),
        {"jsonrpc": "2.0", "id": "x", "method": "nope"},
    ]
    requests = tmp_path / "jigcmd-requests.jsonl"
    requests.write_text("".join(json.dumps(f) + "\n" for f in frames))
    done = subprocess.run(
        ["/bin/sh", "-c", f'"{sys.executable}" "{FAKE_SERVER}" < "{requests}"'],
        capture_output=True,
        env=server_env(),
        timeout=FAILSAFE_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    assert set(answers) == {"p", "r1", "r2", "x"}
    assert answers["r1"]["result"] == answers["r2"]["result"]
    assert answers["x"]["error"]["code"] == -32601


def test_a_closed_stdout_is_coordinator_loss_the_running_call_is_cancelled_and_the_server_exits(
    tmp_path: Path,
) -> None:
    """The reader goes away while a call runs and nothing is written: fence, log, exit 0."""
    stderr_path = tmp_path / "jigcmd-stderr.txt"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(FAKE_SERVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=server_env(),
        )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(
            json.dumps(flow_call("r1", "op-1", stdin="wait")).encode()
            + b'\n{"jsonrpc":"2.0","id":"alive","method":"ping"}\n'
        )
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == "alive"
        process.stdout.close()
        assert process.wait(timeout=FAILSAFE_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=FAILSAFE_S)
        process.stdin.close()
    assert "coordinator lost" in stderr_path.read_text()


def test_sigterm_cancels_the_running_call_and_exits(server: ServerProcess) -> None:
    """SIGTERM ends the session the same way, with the running call answered."""
    server.send_json(flow_call("r1", "op-1", stdin="wait"))
    assert ping(server)["id"] == "alive"
    server.process.send_signal(signal.SIGTERM)
    assert server.read()["error"]["data"]["code"] == "CANCELLED"
    assert server.wait() == 0


def test_regular_files_and_dev_null_work_as_the_wire(tmp_path: Path) -> None:
    """Input from a file and output to a file (neither pollable) are served to EOF."""
    frames = tmp_path / "jigcmd-in.jsonl"
    frames.write_bytes(
        b'{"jsonrpc":"2.0","id":"a","method":"ping"}\n{"jsonrpc":"2.0","id":"b","method":"ping"}'
    )
    answers = tmp_path / "jigcmd-out.jsonl"
    with frames.open("rb") as stdin, answers.open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, str(FAKE_SERVER)],
            stdin=stdin,
            stdout=stdout,
            env=server_env(),
            timeout=FAILSAFE_S,
            check=False,
        )
    assert done.returncode == 0
    assert [json.loads(line)["id"] for line in answers.read_bytes().splitlines()] == ["a", "b"]
    empty = subprocess.run(
        [sys.executable, str(FAKE_SERVER)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=server_env(),
        timeout=FAILSAFE_S,
        check=False,
    )
    assert (empty.returncode, empty.stdout) == (0, b"")
