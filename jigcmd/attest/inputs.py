"""What `jigcmd verify --evidence` reads: the evidence in every shape jigcmd answers it in.

Each shape is picked by the keys only it has, then decoded strictly as that shape, so an
error names the shape and the path inside the file (`$.evidence.stdout.text`) rather than
the first of several guesses. The shapes, by their distinguishing key:

- `jsonrpc`: an answer line. FLOW Run/1: `.result.value` (a completed call), or a
  `DEADLINE_EXCEEDED`/`CANCELLED` error's `.error.data.details.command`. MCP `tools/call`:
  `.result.structuredContent`.
- `run_id`: a jarvis `run.get` (or `run.create`) answer.
- `budgetBytes`: an MCP `structuredContent`, the budgeted view of the evidence.
- `structuredContent`: an MCP tool result with no JSON-RPC line around it (what an SDK's
  `call_tool` returns), read as a `tools/call` answer's `result`.
- `evidence`: a `jigcmd run --json` answer.
- anything else: the ten evidence fields themselves.

What an answer carries around its evidence (an MCP result's `isError`, `_meta` and `content`,
a `run --json` answer's report and copy of the statement, a Run/1 error's codes) is kept as
read (`Around`), for `verify_answer` to hold against the statement.

Every file is read as strict JSON (`jsonio.strict`): a duplicate key, which one reader takes
first and another last, or nesting past 64 levels is refused, never decoded one way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import msgspec

from jigcmd.evidence import Evidence, StreamText
from jigcmd.jsonio import strict
from jigcmd.protocol.mcp_view import StreamView

__all__ = [
    "INPUT_MAX_BYTES",
    "Around",
    "EvidenceFile",
    "JarvisResult",
    "JarvisView",
    "McpResult",
    "McpView",
    "RunAnswer",
    "read_evidence",
]


class JarvisView(msgspec.Struct, frozen=True):
    """What `jarvis.run.get` (or `run.create`) answers of a run.

    `argv`, `cwd`, `executable`, `matched_rule`, `reason`, `decision` and the timings are
    checked when the record has them: `run.create`'s answer has no argv, cwd or timings, and a
    run recorded before the journal kept the executable has null. `detail` is read only to
    be said unchecked (no signature binds it).
    """

    run_id: int
    status: str
    stdout: StreamText
    stderr: StreamText
    exit_code: int | None
    signal: str | None
    argv: list[str] | msgspec.UnsetType = msgspec.UNSET
    # `run.get` answers null for a run that named none; the statement has "".
    cwd: str | msgspec.UnsetType | None = msgspec.UNSET
    executable: str | msgspec.UnsetType | None = msgspec.UNSET
    matched_rule: str | msgspec.UnsetType | None = msgspec.UNSET
    decision: str | msgspec.UnsetType = msgspec.UNSET
    reason: str | msgspec.UnsetType = msgspec.UNSET
    detail: str | msgspec.UnsetType | None = msgspec.UNSET
    created_unix_ms: int | msgspec.UnsetType = msgspec.UNSET
    finished_unix_ms: int | msgspec.UnsetType | None = msgspec.UNSET
    wall_ms: float | msgspec.UnsetType | None = msgspec.UNSET
    setup_ms: float | msgspec.UnsetType | None = msgspec.UNSET
    # The record's own copy of its statement (`bundle`, and its `digest` and `envelopes`).
    attestation: dict[str, object] | msgspec.UnsetType | None = msgspec.UNSET


@dataclass(frozen=True)
class JarvisResult:
    """A jarvis record as read, and the paths of the fields a jarvis record has not.

    Like an MCP result's (`McpResult`): a field jarvis does not write is no fact of the run,
    whatever it says (`"note": "reviewed and approved"`), and is named as unchecked.
    """

    view: JarvisView
    unknown: tuple[str, ...]


@dataclass(frozen=True)
class Around:
    """What an answer carries around its evidence, and its path in the file (`$.result`).

    An MCP result's `isError`, `_meta` and `content`; a `run --json` answer's `report`,
    `tests`, `attestation` and `error`; a Run/1 error's code and words. Held against the
    statement by `verify_answer`: what it signs compared, the rest named as unchecked.
    """

    shape: Literal["mcp", "run --json", "Run/1 error"]
    value: dict[str, Any]
    at: str


class McpView(msgspec.Struct, frozen=True, rename="camel"):
    """An MCP `structuredContent`: the evidence cut to a budget (`jigcmd/protocol/mcp_view.py`).

    Fields the statement does not bind (`tests`, `budgetBytes`, `notes`, a stream's `uri`, the
    cut of a stream or the invocation) are accepted and said to be unchecked, not refused.
    """

    command: str
    invocation: list[str]
    exit_code: int | None
    signal: str | None
    stop_reason: str
    limits_hit: list[str]
    cleanup: str
    candidate_digest: str
    stdin_digest: str
    # Each stream read as the server wrote it; its `uri` is the server's link, not signed.
    stdout: StreamView
    stderr: StreamView
    budget_bytes: int
    tests: dict[str, object] | None = None
    notes: list[str] | None = None
    # None in a result an older jigcmd made: its `invocation` then ended in its count.
    invocation_omitted: int | None = None


@dataclass(frozen=True)
class McpResult:
    """An MCP `structuredContent` as read, and the paths of the fields jigcmd's has not.

    A field jigcmd does not write is no fact of the run, whatever it says (`"passed": true`):
    the verifier names it as unchecked rather than passing over it in silence.
    """

    view: McpView
    unknown: tuple[str, ...]
    # The answer's `result` around `structuredContent`, when the file is the whole answer.
    around: Around | None = None


@dataclass(frozen=True)
class RunAnswer:
    """The evidence a Run/1 answer line or a `run --json` answer carries, and what of the line
    jigcmd does not write.

    `unusual` names each: a field no Run/1 answer has (`$.note`), a `jsonrpc` other than
    "2.0". Neither is a fact of the run; the verifier says so rather than passing over it.
    """

    evidence: Evidence
    unusual: tuple[str, ...]
    # A Run/1 error's `error`, or a `run --json` answer's fields beside `evidence`.
    around: Around | None = None


EvidenceFile = Evidence | JarvisResult | McpResult | RunAnswer
# The most `jigcmd verify` reads of one file: well above the largest answer jigcmd writes. A
# test result names at most 2,000 tests of at most 512 characters, each at most 6 bytes of
# JSON (a control character escaped): 6.2 MB, 8.2 MB base64'd into its envelope; the run
# statement under 0.3 MB (32 arguments of 1 KiB, escaped, base64'd); an answer carries the
# bundle twice (`bundle`, `envelopes`) and two streams of at most 64 KiB (0.8 MB escaped):
# under 19 MB in all.
INPUT_MAX_BYTES = 64 * 1024 * 1024
_T = TypeVar("_T")
# The two failures that carry the evidence of how a stopped run ended (or none, a waiter's).
_STOPS = ("DEADLINE_EXCEEDED", "CANCELLED")


def read_evidence(data: bytes) -> EvidenceFile:
    """The evidence in `data`, whichever shape carries it; `ValueError` names what is wrong."""
    try:
        value = strict.loads(data)
    except strict.Malformed as exc:
        raise ValueError(f"not JSON: {exc}") from None
    except strict.StrictJSONError as exc:
        raise ValueError(f"not strict JSON: {exc}") from None
    return _pick(value, "$")


def _pick(value: object, at: str) -> EvidenceFile:
    if not isinstance(value, dict):
        raise ValueError(f"not jigcmd evidence: `{at}` is not a JSON object")
    if "jsonrpc" in value:
        return _answer_line(value, at)
    if "run_id" in value:
        view = _convert(value, JarvisView, at, "a jarvis run record")
        unknown = tuple(f"{at}.{key}" for key in value if key not in _RECORD_FIELDS)
        return JarvisResult(view, unknown)
    if "budgetBytes" in value or "limitsHit" in value:
        return _mcp(value, at)
    if "structuredContent" in value:
        # A bare MCP tool result (what an SDK's call_tool returns and a host stores): checked
        # as the `result` of a whole answer is.
        mcp = _mcp(value["structuredContent"], f"{at}.structuredContent")
        return McpResult(mcp.view, mcp.unknown, Around("mcp", value, at))
    if "content" in value:
        raise ValueError(
            "an MCP tool result without `structuredContent` (an older protocol version's, "
            "before 2025-06-18): it carries no evidence to check"
        )
    if "evidence" in value:
        evidence = _convert(value["evidence"], Evidence, f"{at}.evidence", "jigcmd evidence")
        return RunAnswer(evidence, (), Around("run --json", value, at))
    if isinstance(value.get("error"), dict):
        code = value["error"].get("code")
        raise ValueError(
            f"a `jigcmd run --json` error answer ({code}) with no evidence: only a deadline's "
            "or a cancel's carries it, at `.evidence`"
        )
    return _convert(value, Evidence, at, "jigcmd evidence")


def _answer_line(line: dict[str, Any], at: str) -> EvidenceFile:
    """The evidence a JSON-RPC answer line carries (Run/1 or MCP), or why it carries none."""
    error = line.get("error")
    if isinstance(error, dict):
        data = error.get("data")
        details = data.get("details") if isinstance(data, dict) else None
        if isinstance(details, dict) and "command" in details:
            where = f"{at}.error.data.details.command"
            evidence = _convert(details["command"], Evidence, where, "jigcmd evidence")
            around = Around("Run/1 error", error, f"{at}.error")
            return RunAnswer(evidence, _unusual(line, at, "error", ()), around)
        code = data.get("code") if isinstance(data, dict) else None
        if code in _STOPS:
            # A waiter's own stop: it left, the operation did not stop with it (or never ran).
            raise ValueError(
                f"a JSON-RPC error answer ({code}) with no evidence: this caller's own stop "
                "(it stopped waiting while the operation went on for its other callers, or "
                "nothing ran), which carries none; where the operation ran, its own recorded "
                "answer carries the evidence (the same call again, same operationId, replays "
                "it once it has ended)"
            )
        raise ValueError(
            f"a JSON-RPC error answer ({code or error.get('code')}) with no evidence: only "
            "DEADLINE_EXCEEDED and CANCELLED carry it, at `.error.data.details.command`"
        )
    result = line.get("result")
    if not isinstance(result, dict):
        raise ValueError(f"a JSON-RPC answer line without a result object at `{at}.result`")
    if "value" in result:
        evidence = _convert(result["value"], Evidence, f"{at}.result.value", "jigcmd evidence")
        return RunAnswer(evidence, _unusual(line, at, "result", result.keys() - {"value"}))
    if "structuredContent" in result:
        where = f"{at}.result.structuredContent"
        mcp = _mcp(result["structuredContent"], where)
        unknown = (*_unusual(line, at, "result", ()), *mcp.unknown)
        return McpResult(mcp.view, unknown, Around("mcp", result, f"{at}.result"))
    raise ValueError(
        "a JSON-RPC answer with neither `.result.value` (FLOW Run/1) nor "
        "`.result.structuredContent` (MCP tools/call from 2025-06-18; an older protocol "
        "version's result has none to check)"
    )


def _unusual(line: dict[str, Any], at: str, outcome: str, extra: Iterable[str]) -> tuple[str, ...]:
    """What of an answer line jigcmd never writes: its fields beyond these, another version."""
    said = [f"{at}.{key}" for key in line if key not in ("jsonrpc", "id", outcome)]
    said += [f"{at}.{outcome}.{key}" for key in sorted(extra)]
    if line.get("jsonrpc") != "2.0":
        said.insert(
            0, f'{at}.jsonrpc {msgspec.json.encode(line.get("jsonrpc")).decode()}, not "2.0"'
        )
    return tuple(said)


def _mcp(value: object, at: str) -> McpResult:
    view = _convert(value, McpView, at, "an MCP structuredContent")
    # Converted, so an object whose streams are objects.
    fields: dict[str, Any] = value if isinstance(value, dict) else {}
    unknown = [f"{at}.{key}" for key in fields if key not in _VIEW_FIELDS]
    for name in ("stdout", "stderr"):
        stream = fields.get(name, {})
        unknown += [f"{at}.{name}.{key}" for key in stream if key not in _STREAM_FIELDS]
        # An integer or absent (a result an older jigcmd made), never null: none was null.
        if "textBytes" in stream and stream["textBytes"] is None:
            raise ValueError(
                "not an MCP structuredContent: textBytes is null, not an integer - at "
                f"`{at}.{name}.textBytes`"
            )
    return McpResult(view, tuple(unknown))


def _wire_names(kind: type[msgspec.Struct]) -> frozenset[str]:
    return frozenset(field.encode_name for field in msgspec.structs.fields(kind))


_VIEW_FIELDS = _wire_names(McpView)
_RECORD_FIELDS = _wire_names(JarvisView)
_STREAM_FIELDS = _wire_names(StreamView)


def _convert(value: object, kind: type[_T], at: str, shape: str) -> _T:
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        raise ValueError(f"not {shape}: {_placed(str(exc), at)}") from exc


def _placed(message: str, at: str) -> str:
    """msgspec's message with its path (`$…`, relative to the value) made the file's."""
    if at == "$":
        return message if " - at `$" in message else f"{message} - at `$`"
    if " - at `$" in message:
        return message.replace(" - at `$", f" - at `{at}", 1)
    return f"{message} - at `{at}`"
