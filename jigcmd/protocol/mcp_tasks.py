"""The Tasks extension (`io.modelcontextprotocol/tasks`) as one session keeps its tasks.

A tool call whose request declares the extension (and has no operation key of its own)
becomes a task: its id is the operation id the journal records it under, 128 random bits,
bound to the caller's run (a `tasks/get` is only ever answered from this run's records).
The `CreateTaskResult` goes out once the journal holds the operation (`owned`); a call
refused before that is answered directly, as the extension lets a server decide per request.
A task this session does not hold (another server's, before a restart) is answered from the
journal: its recorded result, `working` while its row is open, or the uncertain end that
recovery recorded; it is never run again.
"""

from __future__ import annotations

import re
import secrets
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any, Final, Literal

import msgspec

from jigcmd.errors import Code, JigError
from jigcmd.protocol import jsonrpc

__all__ = [
    "POLL_INTERVAL_MS",
    "TaskBook",
    "TaskState",
    "TaskStatus",
    "ended",
    "is_task_id",
    "new_task_id",
    "no_task",
    "task_fields",
]

TaskStatus = Literal["working", "completed", "cancelled"]
# How often a client is asked to poll; a run lasts at most its ceiling (10 s by default).
POLL_INTERVAL_MS: Final = 500
# Finished tasks a session still answers from memory (the journal answers the rest).
_REMEMBERED: Final = 256
_TASK_ID: Final = re.compile(r"task-[0-9a-f]{32}")


def new_task_id() -> str:
    """An unguessable task id (128 random bits), also the operation id in the journal."""
    return f"task-{secrets.token_hex(16)}"


def is_task_id(value: object) -> bool:
    """Whether `value` has the shape of a task id this server hands out."""
    return type(value) is str and _TASK_ID.fullmatch(value) is not None


def no_task(request_id: jsonrpc.Id, task_id: str, why: str = "no such task in this run") -> bytes:
    """-32602 for a task id this run does not know (another run's is not found either)."""
    return jsonrpc.encode_error(
        request_id, jsonrpc.INVALID_PARAMS, f"Invalid params: task {task_id!r}: {why}"
    )


def _iso(unix_ms: int) -> str:
    moment = datetime.fromtimestamp(unix_ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TaskState(msgspec.Struct):
    """One task as `tasks/get` describes it."""

    task_id: str
    created_unix_ms: int
    updated_unix_ms: int
    status: TaskStatus = "working"
    # The final `CallToolResult` once completed.
    result: dict[str, Any] | None = None
    message: str | None = None


def task_fields(task: TaskState) -> dict[str, Any]:
    """The `Task` members (plus `result` once completed), as the extension shapes them."""
    fields: dict[str, Any] = {
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": _iso(task.created_unix_ms),
        "lastUpdatedAt": _iso(task.updated_unix_ms),
        # The journal keeps every task: no expiry.
        "ttlMs": None,
    }
    if task.status == "working":
        fields["pollIntervalMs"] = POLL_INTERVAL_MS
    if task.message is not None:
        fields["statusMessage"] = task.message
    if task.status == "completed" and task.result is not None:
        fields["result"] = task.result
    return fields


def ended(task: TaskState, outcome: object, result: dict[str, Any], now_ms: int) -> None:
    """Record how a task ended: `cancelled` for a cancel, else `completed` with its result.

    A refusal, a deadline or an uncertain end is a tool result with `isError` (the extension's
    `failed` is only for JSON-RPC errors, which a started tool call never ends with).
    """
    task.updated_unix_ms = now_ms
    if isinstance(outcome, JigError):
        task.message = f"{outcome.code.value}: {outcome.message}"
        if outcome.code == Code.CANCELLED:
            task.status = "cancelled"
            return
    task.status = "completed"
    task.result = result


class TaskBook:
    """The tasks one session created: announced or not, running, and recently finished."""

    def __init__(self) -> None:
        """Hold no task yet."""
        self._running: dict[str, TaskState] = {}
        # Task id -> the request id its `CreateTaskResult` still has to answer.
        self._unannounced: dict[str, object] = {}
        self._finished: OrderedDict[str, TaskState] = OrderedDict()

    def create(self, task_id: str, request_id: object) -> None:
        """A call became a task; it exists (and is announced) once the journal holds it."""
        self._unannounced[task_id] = request_id

    def announce(self, task_id: str, created_unix_ms: int) -> TaskState | None:
        """The task's seed state, the first time its row is known durable; else None.

        `created_unix_ms` is the row's: the task is created when the journal holds it (its
        `CreateTaskResult` goes out then), and a restarted server reads the same instant
        back from the row, so `createdAt` never moves.
        """
        if self._unannounced.pop(task_id, None) is None:
            return None
        task = self._running[task_id] = TaskState(task_id, created_unix_ms, created_unix_ms)
        return task

    def awaits_announcement(self, task_id: str) -> bool:
        """Whether the call's request is still unanswered (nothing durable yet)."""
        return task_id in self._unannounced

    def get(self, task_id: str) -> TaskState | None:
        """A task this session holds, running or recently finished."""
        return self._running.get(task_id) or self._finished.get(task_id)

    def running(self, task_id: str) -> bool:
        """Whether the task is still running in this session."""
        return task_id in self._running

    def drop(self, task_id: str) -> None:
        """Forget a task that was never announced (its call was answered directly)."""
        self._unannounced.pop(task_id, None)
        self._running.pop(task_id, None)

    def finish(self, task_id: str) -> TaskState:
        """Move a task to the finished ones (the oldest are left to the journal)."""
        self._unannounced.pop(task_id, None)
        task = self._running.pop(task_id)
        self._finished[task_id] = task
        while len(self._finished) > _REMEMBERED:
            self._finished.popitem(last=False)
        return task
