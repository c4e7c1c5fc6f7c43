"""The interface the stdio server uses to reach commands; `jigcmd.command.service` implements it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final, Protocol

from jigcmd.cancel import CancelSignal
from jigcmd.protocol.commands import CommandKind, Recorded, RunResult, ToolInfo

__all__ = [
    "PROGRESS_EVERY_S",
    "CommandBackend",
    "CommandKind",
    "Owned",
    "Progress",
    "Recorded",
    "RunResult",
    "ToolInfo",
]


# A call with a progress token hears how it goes this often, running or waiting for a slot.
PROGRESS_EVERY_S: Final = 0.5


class Progress(Protocol):
    """Tells the caller how a call is going: a short line, and optionally how far in time.

    `elapsed_ms` since the call began and `total_ms` until its run's deadline; without them
    the shell counts on its own.
    """

    def __call__(
        self, message: str, elapsed_ms: int | None = None, total_ms: int | None = None
    ) -> Awaitable[None]:
        """Send one progress line."""
        ...


# Told that the journal holds the call's operation, and when its row says it was created.
Owned = Callable[[int], Awaitable[None]]


class CommandBackend(Protocol):
    """Validates, plans and executes one command call; both wire dialects share it.

    `tools()` is read once when a session starts: the catalog is fixed for the process.
    `run()` receives the capability `run` input exactly as the caller sent it (for MCP, the tool
    name becomes `command`), and returns the evidence of a completed command whatever its exit.
    Every failure is a `jigcmd.errors.JigError`: `INVALID_INPUT`, `UNAVAILABLE`,
    `RESOURCE_EXHAUSTED`, `EXECUTION_FAILED`, `UNCERTAIN`, and `DEADLINE_EXCEEDED` or
    `CANCELLED` with `details={"command": evidence}` when evidence was collected. When `cancel`
    is set the run must stop, clean up and return or raise promptly; the server waits for it.
    `progress`, when given, forwards short human-readable status lines to the caller.
    `signature` is the Run/1 operation signature (None for MCP calls): with it, the backend
    makes the operation identity durable (replay, conflict, uncertain) beyond this session.
    `context` names the caller's context (the session); `root_run` the caller's run, the scope
    of durable operation identity (required with `signature`). With `wait_for_slot` a call
    that finds every envelope slot in use waits for one (first come, first served, until its
    deadline) instead of failing `RESOURCE_EXHAUSTED` at once; a call refused by validation
    never waits. `owned`, when given, is awaited once the journal holds the call's operation
    (its row committed before dispatch); a call refused before that never calls it. `trace_context`,
    the caller's W3C trace context, is kept with the operation's journal row.
    Any other exception is treated as a bug and answered as `UNCERTAIN`.
    """

    def tools(self) -> list[ToolInfo]:
        """The commands this server offers, in Binding order, with availability."""
        ...

    def tool_changes(self) -> AsyncIterator[list[ToolInfo]]:
        """Each new catalog, as re-admission changes it while serving (may never yield)."""
        ...

    def read_resource(self, scope: str, uri: str) -> tuple[bytes, str]:
        """A per-run resource's bytes and MIME type for a caller of `scope` (blocking).

        Raises `LookupError` with the reason when there is no such resource for `scope`.
        """
        ...

    async def run(
        self,
        input: object,
        *,
        operation_id: str,
        deadline_unix_ms: int | None,
        cancel: CancelSignal,
        progress: Progress | None,
        signature: str | None = None,
        context: str = "",
        root_run: str | None = None,
        wait_for_slot: bool = False,
        detailed: bool = False,
        owned: Owned | None = None,
        trace_context: dict[str, str] | None = None,
    ) -> RunResult:
        """Run one validated request to completion and return its evidence."""
        ...

    def answered(self) -> None:
        """The answer to a call was just written to the caller (a hint; never blocks).

        The envelope refills its pool of prepared envelopes after it, so that the preparing
        does not compete with the answer (docs/envelope.md); may do nothing.
        """
        ...

    async def recorded(self, operation_id: str, *, root_run: str) -> Recorded | None:
        """What the journal holds of an operation of `root_run`; None: nothing, or no journal."""
        ...
