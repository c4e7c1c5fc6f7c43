"""How a reader finds the quoted parts of an MCP result's text: its Markdown code blocks."""

from __future__ import annotations

import re
from typing import Any, Final

from jigcmd.protocol.inert import visible

__all__ = ["parts", "split"]

_FENCE: Final = re.compile("`{3,}")


def split(text: str) -> tuple[list[str], list[str]]:
    """The lines outside code blocks, and each block's text (opened and closed by one fence)."""
    outside: list[str] = []
    blocks: list[str] = []
    block: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        if fence is None and _FENCE.fullmatch(line):
            fence, block = line, []
        elif fence is not None and line == fence:
            fence = None
            blocks.append("\n".join(block))
        elif fence is not None:
            block.append(line)
        else:
            outside.append(line)
    assert fence is None, "a code block is never closed"
    return outside, blocks


def parts(view: dict[str, Any]) -> list[str]:
    """Each stream's head and tail that the text quotes (the view's), and past the cap its
    end, as it quotes them."""
    quoted = [
        view[name].get(part, "")
        for name in ("stdout", "stderr")
        for part in ("head", "tail", "end")
    ]
    return [visible(part).removesuffix("\n") for part in quoted if part]
