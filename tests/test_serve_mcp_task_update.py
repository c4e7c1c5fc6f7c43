"""`tasks/update` of an id that is no task says so, as `tasks/get` and `tasks/cancel` do.

A tester's `tasks/update` of `task-nope` was answered "it has no outstanding input request",
words that say the task exists. Driven as a host does, in raw 2026-07-28 frames on a real
`jigcmd serve`: unknown ids (of a task's shape or not) get the words `tasks/get` gets; a
task that is one, live and after a restart (the journal's), is told it asks for no input.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope

TASKS: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": TASKS,
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}
NO_INPUT = "it has no outstanding input request"


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    return admit_example(tmp_path)


def _message(server: ServeChild, method: str, task_id: str) -> str:
    """The -32602 error's message for `method` of `task_id`."""
    error = server.request(method, {"taskId": task_id, "_meta": META})["error"]
    assert error["code"] == -32602, error
    message: str = error["message"]
    return message


def test_tasks_update_of_an_unknown_id_says_there_is_no_such_task(
    binding: Path, tmp_path: Path
) -> None:
    args = ["--state-dir", str(tmp_path / "state"), "--run-id", "run-update"]
    with ServeChild(binding, args) as server:
        for task_id in ("task-nope", "task-" + "0" * 32):
            said = f"Invalid params: task {task_id!r}: no such task in this run"
            assert _message(server, "tasks/get", task_id) == said
            assert _message(server, "tasks/update", task_id) == said
        assert server.close_input() == 0


def test_tasks_update_of_a_task_says_it_asks_for_no_input_live_and_from_the_journal(
    binding: Path, tmp_path: Path
) -> None:
    args = ["--state-dir", str(tmp_path / "state"), "--run-id", "run-update"]
    call = {
        "name": "cli",
        "arguments": {"files": {"src/cli.ts": 'console.log("hi");\n'}},
        "_meta": META,
    }
    with ServeChild(binding, args) as server:
        task_id = server.request("tools/call", call)["result"]["taskId"]
        said = f"Invalid params: task {task_id!r}: {NO_INPUT}"
        assert _message(server, "tasks/update", task_id) == said
        deadline = time.monotonic() + 30
        task = {"taskId": task_id, "_meta": META}
        while server.request("tasks/get", task)["result"]["status"] == "working":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert server.close_input() == 0
    with ServeChild(binding, args) as server:
        assert _message(server, "tasks/update", task_id) == said
        assert server.close_input() == 0
