"""The MCP tool catalogue: one tool per command, its schemas and the words a model reads first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from jigcmd.contract import (
    MAX_ARG_BYTES,
    MAX_ARGS,
    MAX_CANDIDATE_BYTES,
    MAX_FILES,
    MAX_STDIN_BYTES,
    OUTPUT_CAP_BYTES,
)
from jigcmd.plan import Limits
from jigcmd.policy.planner import CEILING_SECONDS
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.commands import ToolInfo
from jigcmd.protocol.mcp_schemas import ARGUMENTS_SCHEMA, RESULT_SCHEMA
from jigcmd.protocol.mcp_versions import ANNOTATED, LATEST_VERSION, STRUCTURED
from jigcmd.protocol.mcp_view import DEFAULT_BUDGET_BYTES

__all__ = ["input_schema", "tool_arguments", "tools_list_json"]

# Sizes are counted in UTF-8 bytes; a schema's `maxLength` counts characters, so it holds
# the same number only for ASCII: the words say bytes, not to promise what is refused.
_BYTES: Final = "sizes are UTF-8 bytes, not characters: a character outside ASCII takes 2-4"
# The envelope's limits, as the planner sets them: a process limit would be untrue (a
# thread counts against it too).
_LIMITS: Final = Limits()
# What each tool argument is, in the words a model reads; the bounds come from the schema.
_ARGUMENT_WORDS: Final = {
    "files": f"The candidate project: 1-{MAX_FILES} relative paths mapped to their UTF-8 text "
    f"(at most {MAX_CANDIDATE_BYTES:,} bytes in total; {_BYTES}). The command's own files "
    "must be included.",
    "args": "Arguments passed verbatim to the script (never Bun options), each at most "
    f"{MAX_ARG_BYTES:,} bytes ({_BYTES}).",
    "stdin": f"Text supplied on standard input (at most {MAX_STDIN_BYTES:,} bytes; {_BYTES}).",
}


def tool_arguments(kind: str) -> tuple[str, ...]:
    """The arguments a tool takes: `files` and `stdin`, and `args` for a run command.

    A test command accepts no arguments (request rule 8): its tool has no `args` at all.
    """
    return tuple(name for name in ARGUMENTS_SCHEMA["properties"] if name != "args" or kind == "run")


def input_schema(kind: str, paths: Sequence[str] = ()) -> dict[str, Any]:
    """The tool input schema: `files`, plus `args`/`stdin` only where the command accepts them.

    With the command's `paths`, the `files` description names the ones it must include.
    """
    properties: dict[str, Any] = {}
    for name in tool_arguments(kind):
        schema = ARGUMENTS_SCHEMA["properties"][name]
        words = _ARGUMENT_WORDS[name]
        if name == "files" and paths:
            named = ", ".join(f"`{path}`" for path in paths)
            words = f"{words} This command needs {named}, and {_imported(len(paths))}."
        # The description goes right after the type, where clients have always found it.
        properties[name] = {"type": schema["type"], "description": words} | schema
    return {**ARGUMENTS_SCHEMA, "properties": properties}


def _imported(files: int) -> str:
    """What the files named also need sent: `it imports` for one file, `they import` for more."""
    return "every file it imports" if files == 1 else "every file they import"


def _description(tool: ToolInfo, budget: int = DEFAULT_BUDGET_BYTES) -> str:
    """What a model needs on its first call: the command, the files, the bounds, the result.

    An unavailable tool names no command line: after a drift that would be the edited,
    unreviewed one.
    """
    if tool.unavailable is not None:
        # The reason is a clause ("…; run `jigcmd lock …` to review and re-admit"): end it.
        reason = tool.unavailable.rstrip()
        reason += "" if reason.endswith((".", "!", "?")) else "."
        return (
            f"Unavailable: {reason} Calls are refused until the operator reviews "
            "and re-admits the Binding (the tool list changes then)."
        )
    needed = " and ".join(f"`{path}`" for path in tool.paths) or "the command's own files"
    if tool.kind == "test":
        runs = f"Runs `{tool.command_line}` (Bun's test runner on the reviewed test files)"
        inputs = "No arguments."
        tests = (
            " For this test command the result also has `tests`: counts and each failing test "
            "(file, describe path, name, line, message, first stack frames) from the runner's "
            "JUnit report, which candidate code can alter (the exit code is the fact). Bun runs "
            "in CI mode: test.only, and a snapshot it would have to write, fail."
        )
    else:
        runs = f"Runs `{tool.command_line}` (the reviewed entry point with your arguments)"
        inputs = (
            f"`args`: at most {MAX_ARGS} arguments of at most {MAX_ARG_BYTES // 1024} KiB of "
            "UTF-8 each, given to the script verbatim (never Bun options)."
        )
        tests = ""
    parts = [
        f"{runs} against the project files you send, in a fresh sandbox: no network, no "
        "package install (no node_modules; Bun's built-ins only), no bunfig.toml and no .env "
        "(a [test] preload is not loaded: import setup from the files that need it), a "
        "read-only copy of your files as the working directory (the root of `files`: a path "
        "the code reads, such as test/fixtures/a.json, is relative to it, never to a "
        f"package's own directory), at most {CEILING_SECONDS:g} s, "
        f"{_LIMITS.memory_bytes // 2**20} MiB and {_LIMITS.pids_max} tasks (threads count).",
        f"`files` must include {needed} and {_imported(len(tool.paths) or 2)}: 1-{MAX_FILES} "
        f"relative paths mapped to UTF-8 text, at most {MAX_CANDIDATE_BYTES // 1024} KiB of "
        "UTF-8 in total; "
        "node_modules, .git and .jig are reserved.",
        inputs,
        f"`stdin`: optional text of at most {MAX_STDIN_BYTES // 1024} KiB of UTF-8.",
        "Returns evidence of what ran, sized to at most "
        f"{budget:,} bytes: exitCode or signal, stopReason (exited, deadline, cancelled), and "
        "the head and tail of stdout and stderr with each one's captured length and SHA-256 "
        f"(the first {OUTPUT_CAP_BYTES // 1024} KiB of each are kept; resources/read of the "
        "stream's uri returns all that was kept; past them, the bytes written in all and the "
        f"stream's end), and `notes` on what the sandbox does not do with your files.{tests} "
        "A non-zero exit, such as failing "
        "tests, is evidence (isError false), not a tool error; isError true means nothing ran to "
        "completion (refused input, unavailable, deadline, cancelled).",
    ]
    return " ".join(parts)


def _title(tool: ToolInfo) -> str:
    """ "reviewed" only for an admitted command (a lock that matches, no drift)."""
    if tool.unavailable is not None:
        return f"{tool.name} (unavailable: not admitted)"
    return f"{tool.command_line} (reviewed command {tool.name!r})"


def _tool_definition(
    tool: ToolInfo, version: str, budget: int = DEFAULT_BUDGET_BYTES
) -> dict[str, Any]:
    definition: dict[str, Any] = {
        "name": tool.name,
        "description": _description(tool, budget),
        "inputSchema": input_schema(tool.kind, tool.paths),
    }
    if version in STRUCTURED:
        # `title` came with 2025-06-18, like the output schema.
        definition["title"] = _title(tool)
        definition["outputSchema"] = RESULT_SCHEMA
    if version in ANNOTATED:
        definition["annotations"] = {
            "readOnlyHint": True,
            "openWorldHint": False,
            "idempotentHint": True,
        }
        if version not in STRUCTURED:
            # 2025-03-26 has no tool `title`, but its `ToolAnnotations` has one.
            definition["annotations"]["title"] = _title(tool)
    return definition


def tools_list_json(
    tools: Sequence[ToolInfo], version: str = LATEST_VERSION, budget: int = DEFAULT_BUDGET_BYTES
) -> bytes:
    """The whole `tools/list` result for `version`, encoded once per tool list."""
    return jsonrpc.encode_json(
        {"tools": [_tool_definition(tool, version, budget) for tool in tools]}
    )
