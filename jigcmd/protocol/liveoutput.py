"""What a progress notification says while a command runs: its last line, or the test count.

Fed every piece of output as the server reads it; keeps only the last complete line (control
characters stripped, bidi controls and line separators escaped as in a result's text
(`inert.one_line`), at most `MESSAGE_CHARS`) and, for `bun test`, the count of the
`(pass)` and `(fail)` lines its console prints, so that the message can read "12 passed,
1 failed so far". Bounded: a line is never held beyond `_LINE_MAX` bytes.
"""

from __future__ import annotations

import re
from typing import Final

from jigcmd.protocol.inert import one_line

__all__ = ["MESSAGE_CHARS", "LiveOutput"]

MESSAGE_CHARS: Final = 160
_LINE_MAX: Final = 4096
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]|\x1b\[[0-9;?]*[A-Za-z]")
_ESCAPE: Final = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class LiveOutput:
    """The running command's last complete line, and Bun's pass/fail lines counted so far."""

    def __init__(self, *, tests: bool) -> None:
        self._tests = tests
        self._partial: dict[str, bytes] = {}
        self.last_line = ""
        self.passed = 0
        self.failed = 0

    def feed(self, stream: str, chunk: bytes) -> None:
        """One piece of output of `stream` ("stdout" or "stderr")."""
        data = self._partial.get(stream, b"") + chunk
        *lines, rest = data.split(b"\n")
        self._partial[stream] = rest[-_LINE_MAX:]
        for raw in lines:
            line = _clean(raw)
            if self._tests:
                if line.startswith("(pass) "):
                    self.passed += 1
                elif line.startswith("(fail) "):
                    self.failed += 1
            if line:
                self.last_line = line

    def message(self) -> str:
        """What the next progress notification says."""
        if self._tests and (self.passed or self.failed):
            return f"{self.passed} passed, {self.failed} failed so far"
        return self.last_line or "running"


def _clean(raw: bytes) -> str:
    text = raw[-_LINE_MAX:].decode("utf-8", "replace")
    # The candidate's words in jigcmd's message: inert as a tool result's text shows them.
    text = one_line(_CONTROL.sub("", _ESCAPE.sub("", text)).strip())
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"
