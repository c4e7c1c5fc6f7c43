"""The concise text of a run's evidence, for MCP hosts that cap the size of tool results.

Hosts warn or fail over a few thousand tokens of tool result (two full 64 KiB streams are
~32k tokens), so the `content` text says how the command ended (exit code or signal, stop
reason, cleanup) and shows the head and the tail of each stream with the count of bytes
elided between them; the complete evidence travels as `structuredContent`. The text is at
most `BUDGET_BYTES` of UTF-8, whatever the streams hold.
"""

from __future__ import annotations

from typing import Final

from jigcmd.evidence import Evidence, StreamText

__all__ = ["BUDGET_BYTES", "HEAD_BYTES", "TAIL_BYTES", "summary"]

# Bytes of each stream shown from its start and from its end.
HEAD_BYTES: Final = 1024
TAIL_BYTES: Final = 1024
# The whole text's bound: both streams' head and tail, plus the lines around them.
BUDGET_BYTES: Final = 5 * 1024
# Bytes of the evidence's stream texts (the host keeps the first 64 KiB of each).
_KEPT_BYTES: Final = 65_536


def summary(evidence: Evidence) -> str:
    """How the command ended, then the head and tail of stdout and stderr."""
    if evidence.signal is not None:
        ended = f"was killed by {evidence.signal}"
    else:
        ended = f"exited with code {evidence.exit_code}"
    lines = [
        f"`{' '.join(evidence.invocation)}` {ended} (stop reason: {evidence.stop_reason}; "
        f"cleanup {evidence.cleanup})."
    ]
    for name, stream in (("stdout", evidence.stdout), ("stderr", evidence.stderr)):
        lines += _stream(name, stream)
    text = "\n".join(lines)
    # The parts are bounded; the invocation is the only part a Binding sizes.
    return _cut(text, BUDGET_BYTES)


def _stream(name: str, stream: StreamText) -> list[str]:
    data = stream.text.encode("utf-8")
    more = (
        f"; the command wrote more, the evidence keeps the first {_KEPT_BYTES:,} bytes"
        if stream.truncated
        else ""
    )
    if not data:
        return [f"{name}: empty{more}."]
    if len(data) <= HEAD_BYTES + TAIL_BYTES:
        return [f"{name} ({len(data):,} bytes{more}):", stream.text]
    head = data[:HEAD_BYTES].decode("utf-8", "ignore")
    tail = data[-TAIL_BYTES:].decode("utf-8", "ignore")
    elided = len(data) - len(head.encode("utf-8")) - len(tail.encode("utf-8"))
    return [
        f"{name} ({len(data):,} bytes{more}; head and tail shown):",
        head,
        f"[… {elided:,} bytes elided; structuredContent.{name}.text has them …]",
        tail,
    ]


def _cut(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    marker = " […]"
    return data[: limit - len(marker.encode())].decode("utf-8", "ignore") + marker
