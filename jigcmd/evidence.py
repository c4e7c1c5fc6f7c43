"""The `run` result: exactly the contract's ten evidence fields, and how output becomes text."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

# Re-exported: the envelope caps capture at the contract's limit through this module.
from jigcmd.contract import DIGEST_CHARS, OUTPUT_CAP_BYTES

__all__ = [
    "OUTPUT_CAP_BYTES",
    "Evidence",
    "ResourceReport",
    "StopReason",
    "StreamText",
    "decode_output",
]


StopReason = Literal["exited", "deadline", "cancelled"]

_BOM = "\ufeff"

_Digest = Annotated[str, msgspec.Meta(max_length=DIGEST_CHARS)]


class StreamText(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What one output stream carried: the retained prefix as text, and whether bytes dropped."""

    text: Annotated[str, msgspec.Meta(max_length=OUTPUT_CAP_BYTES)]
    truncated: bool


class Evidence(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """Host-collected process evidence; exactly the contract's ten fields, no more."""

    candidate_digest: _Digest
    command: str
    invocation: list[str]
    stdin_digest: _Digest
    stdout: StreamText
    stderr: StreamText
    exit_code: int | None
    signal: str | None
    stop_reason: StopReason
    cleanup: Literal["complete"]


class ResourceReport(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """Measurements kept beside the evidence (journal, MCP `_meta`, `jigcmd run`), never in it."""

    wall_ms: float
    setup_ms: float
    cpu_ms: float | None
    peak_memory_bytes: int | None
    oom_killed: bool
    pids_limit_hit: bool
    deadline_hit: bool


def decode_output(data: bytes, truncated: bool) -> StreamText:
    """Decode a retained output prefix once: UTF-8 with replacement, leading BOM stripped."""
    # A multibyte sequence cut at the cap decodes to U+FFFD, which is the documented behaviour.
    text = data[:OUTPUT_CAP_BYTES].decode("utf-8", errors="replace")
    if text.startswith(_BOM):
        text = text[1:]
    return StreamText(text=text, truncated=truncated or len(data) > OUTPUT_CAP_BYTES)
