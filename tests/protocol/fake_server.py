"""Test-only entry point: `python fake_server.py [auto|mcp|flow]` serves a fake command backend.

Behaviour is chosen by the call's `stdin`: "wait" blocks until cancelled or its deadline (after
a progress line), "boom" raises an unexpected exception, "stray" prints to stdout and runs a
child that writes to its stdout, "invalid" is refused as INVALID_INPUT; anything else completes
with canned evidence.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import AsyncIterator

import anyio

from jigcmd.cancel import CancelSignal
from jigcmd.clock import unix_ms
from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence, ResourceReport, StopReason, StreamText
from jigcmd.protocol.commands import Recorded, RunResult, ToolInfo
from jigcmd.protocol.session import ProtocolChoice
from jigcmd.server.backend import Owned, Progress
from jigcmd.server.stdio import serve_stdio

TOOLS = [
    ToolInfo("tests", "test", paths=("test/a.test.ts",)),
    ToolInfo("cli", "run", paths=("a.ts",)),
    ToolInfo(
        "locked",
        "run",
        unavailable="the policy is not admitted; run `jigcmd lock`",
        paths=("src/locked.ts",),
    ),
]


def canned_evidence(command: str, stop_reason: StopReason = "exited") -> Evidence:
    """Evidence as a completed fake run reports it."""
    return Evidence(
        candidate_digest="sha256:" + "0" * 64,
        command=command,
        invocation=["bun", "test", "test/a.test.ts"] if command == "tests" else ["bun", "a.ts"],
        stdin_digest="sha256:" + "e" * 64,
        stdout=StreamText(text="1 pass\n", truncated=False),
        stderr=StreamText(text="", truncated=False),
        exit_code=0 if stop_reason == "exited" else None,
        signal=None if stop_reason == "exited" else "SIGKILL",
        stop_reason=stop_reason,
        cleanup="complete",
    )


REPORT = ResourceReport(
    wall_ms=12.5,
    setup_ms=3.0,
    cpu_ms=4.0,
    peak_memory_bytes=1 << 20,
    oom_killed=False,
    pids_limit_hit=False,
    deadline_hit=False,
)


class FakeBackend:
    """A `CommandBackend` that runs nothing."""

    def tools(self) -> list[ToolInfo]:
        return list(TOOLS)

    async def tool_changes(self) -> AsyncIterator[list[ToolInfo]]:
        await anyio.sleep_forever()
        yield []

    def read_resource(self, scope: str, uri: str) -> tuple[bytes, str]:
        raise LookupError(f"no resource {uri!r} (the fake keeps none)")

    def answered(self) -> None:
        pass  # no envelopes to refill

    async def recorded(self, operation_id: str, *, root_run: str) -> Recorded | None:
        # No journal: nothing is recorded beyond the session.
        return None

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
        if not isinstance(input, dict) or not isinstance(input.get("files"), dict):
            raise JigError(
                Code.INVALID_INPUT, "/files: must be an object", {"pointer": "/files", "rule": 2}
            )
        command = str(input.get("command"))
        if command not in {tool.name for tool in TOOLS}:
            raise JigError(Code.INVALID_INPUT, f"/command: {command!r} is not admitted")
        stdin = input.get("stdin", "")
        if stdin == "invalid" or not input["files"]:
            raise JigError(
                Code.INVALID_INPUT, "/files: needs 1-64 entries", {"pointer": "/files", "rule": 2}
            )
        if owned is not None:
            # As if a journal row had been written before dispatch.
            await owned(unix_ms())
        if stdin == "wait":
            if progress is not None:
                await progress("envelope ready")
            with anyio.move_on_after(_until(deadline_unix_ms)):
                await cancel.wait()
            if not cancel.is_set():
                raise JigError(
                    Code.DEADLINE_EXCEEDED,
                    "the call reached its deadline",
                    {"command": canned_evidence(command, "deadline")},
                )
            raise JigError(
                Code.CANCELLED,
                "the call was cancelled",
                {"command": canned_evidence(command, "cancelled")},
            )
        if stdin == "boom":
            raise RuntimeError("fake backend bug")
        if stdin == "stray":
            print("stray output from the service")  # noqa: T201 - proves fd 1 is not the wire
            # stdout=None: the child inherits fd 1, which must not be the wire.
            await anyio.run_process(["/bin/echo", "stray output from a child"], stdout=None)
        return RunResult(evidence=canned_evidence(command), report=REPORT)


def _until(deadline_unix_ms: int | None) -> float:
    """Seconds left until `deadline_unix_ms` (no deadline: forever)."""
    if deadline_unix_ms is None:
        return math.inf
    return max(0.0, deadline_unix_ms / 1000 - time.time())


def main() -> None:
    """Serve the fake backend on stdio."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    choices: dict[str, ProtocolChoice] = {"auto": "auto", "mcp": "mcp", "flow": "flow"}
    protocol = choices[sys.argv[1] if len(sys.argv) > 1 else "auto"]
    anyio.run(
        lambda: serve_stdio(
            FakeBackend(), protocol=protocol, server_name="jigcmd-fake", server_version="0.0.1"
        )
    )


if __name__ == "__main__":
    main()
