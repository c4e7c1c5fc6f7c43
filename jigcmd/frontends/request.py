"""`jigcmd request`: the exact request lines `serve` takes for a command and a directory.

The directory is read as `run --files` reads it (`read_files`, `candidate_files`,
`build_request`: the same leave-outs, `--exclude`, limits, `--stdin-file` and arguments
after `--`), and stdout gets JSON Lines to pipe into `jigcmd serve`: with `--protocol flow`
one FLOW Run/1 `capability/call`; with `mcp` the `initialize` handshake, its
`notifications/initialized` and one `tools/call`. Nothing runs, and no Binding, lock or
state directory is read: `serve` checks the command against its own Binding (a refusal's
fixes keep what the commands `jigcmd init` finds in the directory name or import). Exit 0, the
lines written; 2, nothing written (the directory, the stdin file or the candidate is
invalid, or `--operation-id` is not a Run/1 id; every problem on stderr, as `run` says them).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path

import msgspec

from jigcmd import __version__
from jigcmd.command.bunfig import bunfig_note
from jigcmd.command.projectdir import ProjectFiles
from jigcmd.command.scaffold import ScaffoldError, plan_scaffold
from jigcmd.command.testcalls import only_note, spawn_note
from jigcmd.command.testscript import scripts_test_note
from jigcmd.errors import JigError
from jigcmd.frontends.run import (
    build_request,
    candidate_files,
    note_unused_pipe,
    read_files,
    write_failure,
    write_notes,
)
from jigcmd.policy.binding import is_test_path
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.mcp_era import OPERATION_ID_META

__all__ = ["MCP_PROTOCOL_VERSION", "request"]

# The MCP version the handshake asks for (the newest `serve` speaks with `initialize`).
MCP_PROTOCOL_VERSION = "2025-11-25"
_VERB = "request"


def request(
    command: str,
    *,
    files_dir: Path,
    stdin_file: Path | None,
    args: list[str],
    protocol: str,
    excludes: Sequence[str] = (),
    operation_id: str | None = None,
) -> int:
    """Print the request lines for `command` on `files_dir`; return the exit status."""
    if operation_id is not None and not jsonrpc.is_run1_id(operation_id):
        # `serve` would refuse the line; a usage error here writes none to pipe to it.
        sys.stderr.write(
            f"jigcmd {_VERB}: --operation-id {operation_id!r} must match "
            f"{jsonrpc.RUN1_ID_RULE}, as serve requires of an operation id; nothing written\n"
        )
        return 2
    try:
        project = read_files(files_dir, excludes)
        if isinstance(project, JigError):
            raise project
        # No Binding here: the files its command names are `serve`'s to check. A fix keeps
        # what the commands `init` finds here name or import, never leaving out one of those.
        files = candidate_files(project, _roots(project), "", _VERB)
        input = build_request(command, files, stdin_file, args)
    except JigError as exc:
        return write_failure(exc, as_json=False, verb=_VERB)
    # Not knowing the command's kind, every note that may concern it.
    tests = [path for path in project.files if is_test_path(path)]
    notes = (
        project.note(),
        project.snapshot_note(),
        only_note(project.files, tests),
        scripts_test_note(project.files),
        bunfig_note(project.files, named=tests),
        spawn_note(project.files, project.files),
    )
    write_notes(project, [note for note in notes if note is not None], _VERB)
    note_unused_pipe(stdin_file, _VERB)
    if protocol == "flow":
        lines = [_flow_call(input, operation_id or _operation_id(input))]
    else:
        lines = _mcp_calls(input, operation_id)
    sys.stdout.write("".join(msgspec.json.encode(line).decode() + "\n" for line in lines))
    return 0


def _roots(project: ProjectFiles) -> tuple[str, ...]:
    """The files the directory's commands start from, as `init` finds them (its tests and
    entry points); its test files alone when `init` would refuse it."""
    try:
        return plan_scaffold(project).needed()
    except ScaffoldError:
        return tuple(path for path in project.files if is_test_path(path))


def _operation_id(input: dict[str, object]) -> str:
    """One id per distinct request: the same directory again replays under one run id,
    a changed one is a new operation, not a conflict."""
    digest = hashlib.sha256(msgspec.json.encode(input, order="sorted")).hexdigest()
    return f"request-{digest[:16]}"


def _flow_call(input: dict[str, object], operation_id: str) -> dict[str, object]:
    """One FLOW Run/1 call of the Project Command capability's `run` (Run/1 ids are strings)."""
    params = {"operationId": operation_id, "slot": "command", "method": "run", "input": input}
    return {"jsonrpc": "2.0", "id": operation_id, "method": "capability/call", "params": params}


def _mcp_calls(input: dict[str, object], operation_id: str | None) -> list[dict[str, object]]:
    """The handshake, then the command's tool called with the rest of the request; under
    the caller's operation key when there is one (its retry replays, docs/mcp.md)."""
    arguments = {key: value for key, value in input.items() if key != "command"}
    call: dict[str, object] = {"name": input["command"], "arguments": arguments}
    if operation_id is not None:
        call["_meta"] = {OPERATION_ID_META: operation_id}
    initialize = {
        "protocolVersion": MCP_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "jigcmd-request", "version": __version__},
    }
    return [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": call,
        },
    ]
