"""The three jarvis tools: names, capabilities, schemas, and strict decoding of their arguments.

Pure. Every refusal is a `ToolError` carrying the HTTP status it becomes and a message that
names the failing field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from jigcmd.jarvis.policy import Request
from jigcmd.jsonio.strict import MAX_SAFE_INTEGER

__all__ = [
    "ARGV_ITEM_MAX_BYTES",
    "ARGV_MAX_ITEMS",
    "TOOLS",
    "ToolError",
    "ToolSpec",
    "decode_invoke",
    "decode_run_id",
    "decode_run_request",
    "tool_named",
    "tool_path",
]

ARGV_MAX_ITEMS = 256
ARGV_ITEM_MAX_BYTES = 4096
PATH_MAX_BYTES = 4096
TIMEOUT_MS_MAX = 2**31 - 1


class ToolError(Exception):
    """Raised when a call cannot be served; `status` is the HTTP status it becomes."""

    def __init__(
        self, status: int, message: str, *, headers: Mapping[str, str] | None = None, **extra: str
    ) -> None:
        """`headers` go on the HTTP response (e.g. `Retry-After`); `extra` into its body."""
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})
        self.extra = extra


class ToolSpec(msgspec.Struct, frozen=True):
    """How one tool is described in the manual and which grant it needs."""

    name: str
    capability: str
    description: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]


# No NUL (a C string ends there); `pattern` is ECMA-262 and Python `re` alike.
_NO_NUL = "^[^\\x00]*$"
# `maxLength` counts characters, jarvis's bound is UTF-8 bytes: the same for ASCII; an item
# of non-ASCII characters may pass the one and not the other.
_ARGV_ITEM: dict[str, Any] = {
    "type": "string",
    "maxLength": ARGV_ITEM_MAX_BYTES,
    "pattern": _NO_NUL,
}
_RUN_INPUTS: dict[str, Any] = {
    "type": "object",
    "required": ["argv"],
    "additionalProperties": False,
    "properties": {
        "argv": {
            "type": "array",
            "items": _ARGV_ITEM,
            # The program's name is not empty (draft 2020-12; `items` covers the rest).
            "prefixItems": [{**_ARGV_ITEM, "minLength": 1}],
            "minItems": 1,
            "maxItems": ARGV_MAX_ITEMS,
            "description": "program (bare name from the policy's search_path, or absolute "
            f"path) and its arguments; no shell; each at most {ARGV_ITEM_MAX_BYTES} UTF-8 "
            "bytes, no NUL",
        },
        "cwd": {
            "type": "string",
            "pattern": "^/" + _NO_NUL[1:],
            "maxLength": PATH_MAX_BYTES,
            "description": f"absolute working directory on the host; at most {PATH_MAX_BYTES} "
            "UTF-8 bytes, no NUL",
        },
        "timeout_ms": {
            "type": "integer",
            "minimum": 1,
            "maximum": TIMEOUT_MS_MAX,
            "description": "capped by the matched rule and the policy's ceiling (10 s default)",
        },
    },
}
_DECISION: dict[str, Any] = {
    "decision": {"type": "string", "enum": ["allow", "deny"]},
    "reason": {"type": "string"},
    "matched_rule": {"type": ["string", "null"]},
}
_STREAM: dict[str, Any] = {
    "type": "object",
    "required": ["text", "truncated"],
    "additionalProperties": False,
    "properties": {"text": {"type": "string"}, "truncated": {"type": "boolean"}},
}
# One DSSE envelope of the bundle, parsed (`jigcmd.attest.dsse.Envelope`).
_ENVELOPE: dict[str, Any] = {
    "type": "object",
    "required": ["payload", "payloadType", "signatures"],
    "additionalProperties": False,
    "properties": {
        "payload": {"type": "string"},
        "payloadType": {"type": "string"},
        "signatures": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["sig", "keyid"],
                "additionalProperties": False,
                "properties": {"sig": {"type": "string"}, "keyid": {"type": "string"}},
            },
        },
    },
}
# A completed run's signed statement (`jigcmd.attest.dsse.attestation_fields`), else null.
_ATTESTATION: dict[str, Any] = {
    "type": ["object", "null"],
    "description": "the run's signed statement (docs/attestation.md), null for a run that "
    "failed, is uncertain or still running; `jigcmd verify` checks it",
    "required": ["digest", "bundle", "envelopes"],
    "additionalProperties": False,
    "properties": {
        "digest": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
        "bundle": {"type": "string", "description": "JSON Lines of DSSE envelopes"},
        "envelopes": {"type": "array", "items": _ENVELOPE},
    },
}
_STATUS: dict[str, Any] = {
    "type": ["string", "null"],
    "enum": ["denied", "running", "exited", "deadline", "failed", "uncertain"],
}
_RUN_FIELDS: dict[str, Any] = {
    "run_id": {"type": ["integer", "null"]},
    "status": _STATUS,
    "exit_code": {"type": ["integer", "null"]},
    "signal": {"type": ["string", "null"]},
    "stdout": _STREAM,
    "stderr": _STREAM,
    "detail": {"type": ["string", "null"]},
    # The program's resolved path, the file the run executes (argv[0] keeps its name).
    "executable": {"type": ["string", "null"]},
    "attestation": _ATTESTATION,
}

TOOLS: Mapping[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            name="jarvis.policy.check",
            capability="policy:check",
            description="Evaluate an argv (and cwd) against the jarvis policy without running "
            "anything. Requires capability policy:check.",
            inputs=_RUN_INPUTS,
            outputs={
                "type": "object",
                "required": list(_DECISION),
                "additionalProperties": False,
                "properties": _DECISION,
            },
        ),
        ToolSpec(
            name="jarvis.run.create",
            capability="run:create",
            description="Execute a command after policy evaluation, inside the containment "
            "envelope (host system read-only, no network, cgroup limits). A denied command "
            "starts no process and has run_id null. A run that may outlast ~25 s answers "
            'early with status "running"; poll it with jarvis.run.get. '
            "Requires capability run:create.",
            inputs=_RUN_INPUTS,
            # A denial has the decision, `run_id` null, `status` "denied" and `exit_code`
            # null; an allowed call has every field of the run as recorded.
            outputs={
                "type": "object",
                "required": [*_DECISION, "run_id", "status", "exit_code"],
                "additionalProperties": False,
                "properties": {**_DECISION, **_RUN_FIELDS},
            },
        ),
        ToolSpec(
            name="jarvis.run.get",
            capability="run:read",
            description="The stored record of a run: status, exit code, capped stdout/stderr "
            "and timings. Requires capability run:read.",
            inputs={
                "type": "object",
                "required": ["run_id"],
                "additionalProperties": False,
                "properties": {
                    "run_id": {"type": "integer", "minimum": 1, "maximum": MAX_SAFE_INTEGER}
                },
            },
            outputs={
                "type": "object",
                "required": ["run_id", "status"],
                "additionalProperties": False,
                "properties": {
                    **_RUN_FIELDS,
                    "argv": {"type": "array", "items": {"type": "string"}},
                    "cwd": {"type": ["string", "null"]},
                    "matched_rule": {"type": "string"},
                    "created_unix_ms": {"type": "integer"},
                    "finished_unix_ms": {"type": ["integer", "null"]},
                    "wall_ms": {"type": ["number", "null"]},
                    "setup_ms": {"type": ["number", "null"]},
                },
            },
        ),
    )
}


def tool_path(name: str) -> str:
    """The URL path that calls tool `name`, and only it (`POST`)."""
    return f"/tools/{name}"


def tool_named(name: str) -> ToolSpec:
    """The tool a URL path names (`tool_path`); 404 for any other name."""
    spec = TOOLS.get(name)
    if spec is None:
        raise ToolError(404, f"unknown tool {name[:128]!r} (known: {', '.join(TOOLS)})")
    return spec


def decode_invoke(body: object, spec: ToolSpec) -> Mapping[str, Any]:
    """`{"tool": name, "args": {...}}` posted to `spec`'s URL → its raw arguments.

    The URL alone chooses the tool: a body naming another one is refused, so that a client
    (a UTCP host) that exposes some tools only can rely on each call doing what it names.
    """
    if not isinstance(body, dict):
        raise ToolError(400, "request body must be a JSON object {tool, args}")
    unknown = sorted(set(body) - {"tool", "args"})
    if unknown:
        raise ToolError(400, f"unknown request field {unknown[0]!r} (expected tool, args)")
    name = body.get("tool", spec.name)
    if not isinstance(name, str):
        raise ToolError(400, "`tool` must be a string naming a jarvis tool")
    if name != spec.name:
        raise ToolError(
            400,
            f"the body names tool {name[:128]!r} but was posted to {tool_path(spec.name)}; "
            "a call runs only the tool its URL names",
        )
    if "args" not in body:
        raise ToolError(400, f"the body has no `args`: {spec.name} takes {_takes(spec)}")
    args = body["args"]
    if not isinstance(args, dict):
        raise ToolError(400, f"`args` must be a JSON object: {spec.name} takes {_takes(spec)}")
    return args


def _takes(spec: ToolSpec) -> str:
    """`{"args": {argv, cwd?, timeout_ms?}}`: the body a tool takes, its optional fields marked."""
    required = spec.inputs.get("required", [])
    fields = [name + ("" if name in required else "?") for name in spec.inputs["properties"]]
    return '{"args": {' + ", ".join(fields) + "}}"


def decode_run_request(args: Mapping[str, Any]) -> Request:
    """Validate `{argv, cwd?, timeout_ms?}`."""
    unknown = sorted(set(args) - {"argv", "cwd", "timeout_ms"})
    if unknown:
        raise ToolError(400, f"args: unknown field {unknown[0]!r}")
    argv = args.get("argv")
    if not isinstance(argv, list) or not argv:
        raise ToolError(400, "args.argv must be a non-empty array of strings")
    if len(argv) > ARGV_MAX_ITEMS:
        raise ToolError(400, f"args.argv has more than {ARGV_MAX_ITEMS} items")
    for index, item in enumerate(argv):
        if not isinstance(item, str):
            raise ToolError(400, f"args.argv[{index}] must be a string")
        _text(item, f"args.argv[{index}]", ARGV_ITEM_MAX_BYTES)
    if not argv[0]:
        raise ToolError(400, "args.argv[0] must name a program")
    cwd = args.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str) or not cwd.startswith("/"):
            raise ToolError(400, "args.cwd must be an absolute path")
        _text(cwd, "args.cwd", PATH_MAX_BYTES)
    timeout = args.get("timeout_ms")
    if timeout is not None:
        timeout = _integer(timeout, "args.timeout_ms", TIMEOUT_MS_MAX)
    return Request(argv=tuple(argv), cwd=cwd, timeout_ms=timeout)


def decode_run_id(args: Mapping[str, Any]) -> int:
    """Validate `{run_id}`."""
    unknown = sorted(set(args) - {"run_id"})
    if unknown:
        raise ToolError(400, f"args: unknown field {unknown[0]!r}")
    if "run_id" not in args:
        raise ToolError(400, "args.run_id is required: the run_id run.create answered")
    return _integer(args["run_id"], "args.run_id", MAX_SAFE_INTEGER)


def _integer(value: object, where: str, maximum: int) -> int:
    """An integer from 1 to `maximum`, as the manual's schema says it: JSON Schema counts a
    number with a zero fraction (`5000.0`, `1e3`) as an integer, so jarvis takes it as one."""
    number = int(value) if isinstance(value, float) and value.is_integer() else value
    if not isinstance(number, int) or isinstance(number, bool):
        raise ToolError(
            400, f"{where} must be an integer (a number with no fraction), not {_shown(value)}"
        )
    if not 1 <= number <= maximum:
        raise ToolError(400, f"{where} must be from 1 to {maximum}, not {_shown(value)}")
    return number


def _shown(value: object) -> str:
    """A JSON value, as a refusal names it: a number as written, else its kind."""
    if isinstance(value, float | int) and not isinstance(value, bool):
        return repr(value)
    kinds = {bool: "a boolean", str: "a string", list: "an array", dict: "an object"}
    return kinds.get(type(value), "null")


def _text(value: str, where: str, max_bytes: int) -> None:
    if "\x00" in value:
        raise ToolError(400, f"{where} may not contain NUL")
    if len(value.encode("utf-8")) > max_bytes:
        raise ToolError(400, f"{where} is longer than {max_bytes} UTF-8 bytes")
