"""The JSON Schemas MCP clients see for a tool, generated from the contract's Structs.

msgspec writes the schema; this module reshapes it to what MCP hosts have always been sent:
definitions inlined, no titles or defaults, nullable types as a `type` list, a one-value
enum as `const`, enums in declaration order, and keys in one fixed order. The tool input
is the `run` input without `command` (the tool name selects the command), and leaves the
path grammar (`propertyNames`) to request validation, whose refusal names the rule.
"""

from __future__ import annotations

import typing
from typing import Any, Final

import msgspec

from jigcmd.contract import RequestInput
from jigcmd.evidence import Evidence

__all__ = ["ARGUMENTS_SCHEMA", "EVIDENCE_SCHEMA", "RESULT_SCHEMA"]

# Where each key goes in an emitted schema; the order MCP clients have always been sent.
_KEY_ORDER: Final = (
    "type",
    "description",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "minProperties",
    "maxProperties",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "enum",
    "const",
)
# msgspec's words for people reading the contract's own schemas; MCP tools carry their own.
_DROPPED: Final = frozenset({"title", "description", "default", "propertyNames"})


def _reshape(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """One msgspec schema node, reshaped and with every `$ref` inlined."""
    if "$ref" in schema:
        return _reshape(definitions[schema["$ref"].rsplit("/", 1)[1]], definitions)
    node = {key: value for key, value in schema.items() if key not in _DROPPED}
    members = node.pop("anyOf", None)
    if members is not None:
        # Only nullable scalars are unions in these Structs: `T | None` is `type: [T, null]`.
        node["type"] = [member["type"] for member in members]
    if "enum" in node and len(node["enum"]) == 1:
        node["const"] = node.pop("enum")[0]
    if "properties" in node:
        node["properties"] = {
            name: _reshape(value, definitions) for name, value in node["properties"].items()
        }
    for key in ("items", "additionalProperties"):
        if type(node.get(key)) is dict:
            node[key] = _reshape(node[key], definitions)
    unknown = node.keys() - set(_KEY_ORDER)
    assert not unknown, f"no place for {sorted(unknown)} in an MCP schema"
    return {key: node[key] for key in _KEY_ORDER if key in node}


def _declared_enums(struct: type[msgspec.Struct], schema: dict[str, Any]) -> None:
    """Put each Literal field's enum back in declaration order (msgspec sorts it)."""
    hints = typing.get_type_hints(struct)
    for field in msgspec.structs.fields(struct):
        prop = schema["properties"][field.encode_name]
        if "enum" in prop:
            prop["enum"] = list(typing.get_args(hints[field.name]))


def _struct_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    (root,), definitions = msgspec.json.schema_components((struct,))
    schema = _reshape(root, definitions)
    _declared_enums(struct, schema)
    return schema


def _evidence_schema() -> dict[str, Any]:
    """The evidence as a tool's `outputSchema`."""
    schema = _struct_schema(Evidence)
    # Every field is on the wire, defaults too (the Struct does not omit defaults), so a
    # client may rely on each: all ten are required.
    schema["required"] = list(schema["properties"])
    return schema


def _arguments_schema() -> dict[str, Any]:
    """A tool's `inputSchema` before its words: the `run` input without `command`."""
    schema = _struct_schema(RequestInput)
    del schema["properties"]["command"]
    schema["required"].remove("command")
    return schema


EVIDENCE_SCHEMA: Final = _evidence_schema()
ARGUMENTS_SCHEMA: Final = _arguments_schema()


def _stream_schema(name: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"{name}, cut to the budget: the head and tail of what was captured (the "
        "first 64 KiB the command wrote) and what identifies all of it; past those 64 KiB, "
        "how much the command wrote and the stream's own end.",
        "properties": {
            "capturedBytes": {
                "type": "integer",
                "description": "Bytes captured as the command wrote them (the signed statement's "
                "ending capturedBytes); the text is their UTF-8 decoding.",
            },
            "sha256": {
                "type": "string",
                "description": "sha256: of the captured text's UTF-8 bytes, which "
                "resources/read of `uri` returns (the signed statement's stream subject).",
            },
            "truncated": {
                "type": "boolean",
                "description": "The command wrote more than the 64 KiB kept: `tail` is then the "
                "end of the kept bytes, not of the output; `end` is the output's end.",
            },
            "head": {"type": "string"},
            "omittedBytes": {
                "type": "integer",
                "description": "UTF-8 bytes of the text between head and tail that this "
                "result leaves out: of the text (textBytes), not of the bytes written (each "
                "byte that is not UTF-8 is a U+FFFD there, 3 bytes), so it can exceed "
                "capturedBytes.",
            },
            "tail": {"type": "string", "description": "The end of the captured text."},
            "textBytes": {
                "type": "integer",
                "description": "UTF-8 bytes of the captured text, which head, omittedBytes and "
                "tail add up to; it differs from capturedBytes when the command wrote bytes "
                "that are not UTF-8 (each one a U+FFFD in the text, 3 bytes) or began with a "
                "BOM (dropped).",
            },
            "uri": {"type": ["string", "null"], "description": "The whole captured stream."},
            "writtenBytes": {
                "type": ["integer", "null"],
                "description": "Bytes the command wrote to the stream in all, kept or not; "
                "null when not known (a replay of a run an older jigcmd recorded).",
            },
            "end": {
                "type": "string",
                "description": "When `truncated`: the last bytes the command wrote (at most "
                '4 KiB, cut to the budget), after the kept ones; "" otherwise or when not '
                "known.",
            },
            "endOmittedBytes": {
                "type": "integer",
                "description": "Bytes written between the kept text and `end`, neither kept "
                "nor shown.",
            },
        },
        "required": [
            "capturedBytes",
            "sha256",
            "truncated",
            "head",
            "omittedBytes",
            "tail",
            "textBytes",
            "uri",
            "writtenBytes",
            "end",
            "endOmittedBytes",
        ],
    }


_CTRF_STATUS: Final = ["passed", "failed", "skipped", "pending", "other"]
_CTRF_TEST: Final = {
    "type": "object",
    "description": "One test under CTRF's field names (ctrf-io/ctrf).",
    "properties": {
        "name": {"type": "string"},
        "status": {"type": "string", "enum": _CTRF_STATUS},
        "duration": {"type": "integer", "description": "Milliseconds."},
        "filePath": {"type": "string"},
        "suite": {
            "type": "array",
            "description": "The describe blocks, outermost first.",
            "items": {"type": "string"},
        },
        "line": {"type": "integer"},
        "message": {"type": "string"},
        "trace": {"type": "string", "description": "The first frames of the stack."},
        "rawStatus": {"type": "string", "description": "pass, fail, timeout, skip or todo."},
    },
    "required": ["name", "status", "duration"],
}
_TESTS: Final = {
    "type": ["object", "null"],
    "description": "For a test command: the runner's per-test results (CTRF names), failing "
    "tests first, then skipped and todo, then passing, cut to the budget from the end, so "
    "failing tests are the last to go (`truncated` counts those left out). The "
    "runner ran candidate code, which can alter its report: the host-collected exitCode is the "
    "fact. A report that is missing (a run stopped by its deadline or a cancel before the "
    "runner wrote it, too), too large or unparseable is `problem`, never invented. Null for "
    "a command that is not a test command.",
    "properties": {
        "candidateInfluenced": {"type": "boolean", "const": True},
        "note": {"type": "string"},
        "summary": {
            "type": "object",
            "description": "CTRF's counts; `pending` counts todo tests; `duration` in ms.",
            "properties": {
                key: {"type": "integer"}
                for key in ("tests", "passed", "failed", "skipped", "pending", "other", "duration")
            },
            "required": ["tests", "passed", "failed", "skipped", "pending", "other", "duration"],
        },
        "tests": {"type": "array", "items": _CTRF_TEST},
        "truncated": {"type": "integer"},
        "problem": {"type": "string"},
        "unhandledErrors": {
            "type": "integer",
            "description": "Bun's unhandled errors between tests (a test file that failed to "
            "load is one), which its report does not list; from its console (stderr).",
        },
        "incomplete": {
            "type": "string",
            "description": "Present when the run failed for more than the report lists (a "
            "file that failed to load, an error between tests, or a non-zero exit with no "
            "failed test): why, so `summary` is not the whole result; see stderr.",
        },
        "uri": {"type": "string", "description": "The whole JUnit report."},
    },
    "required": ["candidateInfluenced", "note"],
}


_LIMITS_HIT: Final = {
    "type": "array",
    "description": "The envelope limits the run reached: `memory`, the kernel's OOM killer "
    "killed a process of it (a SIGKILL with stopReason `exited` is then the memory limit, not "
    "the command's own doing); `pids`, a new process or thread was refused. Empty when none.",
    "items": {"type": "string", "enum": ["memory", "pids"]},
}


_NOTES: Final = {
    "type": "array",
    "description": "What Bun under jigcmd does not do with the files sent, for this command, "
    "each one sentence (cut to the budget): a snapshot test that cannot pass in the read-only "
    "tree, a bunfig.toml Bun is not given, a declared package nothing installs, a package.json "
    "jigcmd cannot read. Empty when none applies.",
    "items": {"type": "string"},
}


def _after(properties: dict[str, Any], key: str, name: str, schema: object) -> dict[str, Any]:
    """`properties` with `name` inserted right after `key` (the view's field order)."""
    items = list(properties.items())
    at = [k for k, _ in items].index(key) + 1
    return dict([*items[:at], (name, schema), *items[at:]])


def _result_schema() -> dict[str, Any]:
    """The budgeted result as a tool's `outputSchema` (see `jigcmd.protocol.mcp_view`)."""
    evidence = _evidence_schema()["properties"]
    properties = {
        key: evidence[key]
        for key in ("command", "invocation", "exitCode", "signal", "stopReason", "cleanup")
    }
    properties["invocation"] = {
        "type": "array",
        "description": "What ran: its first words (`bun`, the script or `test`, then its "
        "arguments), each long one cut to its start and `…`; every item is a word of the "
        "command line, the count of those left out is `invocationOmitted`.",
        "items": {"type": "string"},
    }
    properties = _after(
        properties,
        "invocation",
        "invocationOmitted",
        {
            "type": "integer",
            "description": "How many words of the command line, after those in `invocation`, "
            "this result leaves out (0 when it lists them all).",
        },
    )
    properties = _after(properties, "stopReason", "limitsHit", _LIMITS_HIT)
    properties["candidateDigest"] = evidence["candidateDigest"]
    properties["stdinDigest"] = evidence["stdinDigest"]
    properties["stdout"] = _stream_schema("stdout")
    properties["stderr"] = _stream_schema("stderr")
    properties["tests"] = _TESTS
    properties["budgetBytes"] = {
        "type": "integer",
        "description": "structuredContent and content together are at most this many bytes "
        "of JSON; heads, tails and test lists are cut to fit, counts and digests never.",
    }
    properties["notes"] = _NOTES
    return {
        "type": "object",
        "description": "The run's evidence, budgeted: how it ended, each stream's head, tail, "
        "length and SHA-256, and for test commands the per-test results.",
        "properties": properties,
        "required": list(properties),
    }


RESULT_SCHEMA: Final = _result_schema()
