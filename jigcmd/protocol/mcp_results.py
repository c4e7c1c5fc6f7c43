"""MCP tool results built from evidence: a completed run, or a refusal or failure.

A completed command, whatever its exit, is `isError: false` with the evidence as
`structuredContent`; refusals and operational failures are `isError: true` with a readable
text, the evidence when there is some, and the failure code under `_meta["jigcmd/error"]`.
Measurements travel beside the evidence in `_meta["jigcmd/report"]`.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from jigcmd.errors import JigError
from jigcmd.evidence import Evidence
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.commands import RunResult
from jigcmd.protocol.mcp_versions import LATEST_VERSION, STRUCTURED
from jigcmd.protocol.summary import summary

__all__ = ["completed_result", "failure_result"]

# Evidence collected before a deadline or cancel arrives as the builtins of its JSON.
_as_evidence: Final = msgspec.json.Decoder(Evidence)


def _evidence_content(evidence: Evidence, version: str) -> list[dict[str, Any]]:
    """The text content that goes with evidence: the concise summary, within its budget.

    Before 2025-06-18 there is no `structuredContent`, so the complete evidence follows as
    JSON text. From 2025-06-18 it is not repeated as text (which the specification suggests):
    hosts cap tool results, and two full streams alone are ~32k tokens.
    """
    content = [{"type": "text", "text": summary(evidence)}]
    if version not in STRUCTURED:
        content.append({"type": "text", "text": jsonrpc.encode_json(evidence).decode()})
    return content


def completed_result(result: RunResult, version: str = LATEST_VERSION) -> dict[str, Any]:
    """A completed run: not an error whatever the exit; evidence as structured content.

    Before 2025-06-18 there is no `structuredContent`: the evidence is JSON text.
    """
    completed: dict[str, Any] = {
        "content": _evidence_content(result.evidence, version),
        "isError": False,
        "_meta": {"jigcmd/report": result.report},
    }
    if version in STRUCTURED:
        completed["structuredContent"] = result.evidence
    return completed


def failure_result(error: JigError, version: str = LATEST_VERSION) -> dict[str, Any]:
    """A refusal or operational failure as a tool error with a readable reason.

    Evidence collected before a deadline or cancel rides as `structuredContent`, or as JSON
    text before 2025-06-18.
    """
    details = dict(error.details) if error.details else {}
    evidence = details.pop("command", None)
    meta: dict[str, Any] = {"code": error.code.value}
    if details:
        meta["details"] = details
    result: dict[str, Any] = {
        "content": [{"type": "text", "text": f"{error.code.value}: {error.message}"}],
        "isError": True,
        "_meta": {"jigcmd/error": meta},
    }
    if evidence is not None:
        collected = (
            evidence
            if isinstance(evidence, Evidence)
            else _as_evidence.decode(jsonrpc.encode_json(evidence))
        )
        result["content"] += _evidence_content(collected, version)
        if version in STRUCTURED:
            result["structuredContent"] = evidence
    return result
