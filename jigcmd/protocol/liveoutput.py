"""What a progress notification says while a command runs: its last line, or its console's count.

Fed every piece of output the server reads (past the cap, only the ends it reads between
what it drops, each marked as following a gap); keeps only the last few complete non-blank
lines (at most `_LINE_MAX` bytes each) and, for `bun test`, how many lines began `(pass) `
or `(fail) ` on each stream until that stream was cut. The candidate prints those lines, so
the message says they are its console's, not a verified count. Each piece costs a few bulk
operations on its bytes, never a step per line: a candidate printing short lines must not
make the host work per line (it once cost the server 500 times the candidate's CPU). Lines
are decoded and cleaned (control characters stripped, bidi controls and line separators
escaped as in a result's text, `inert.one_line`, at most `MESSAGE_CHARS` with its prefix)
only when a message is made, every 0.5 s, newest first until one is left non-empty. A line
of the command's is said after `OUTPUT_PREFIX`, which begins none of jigcmd's own messages
(`running …`, `queued: …`, `its console printed …`): a line printed to look like one of
them still reads as the command's.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Final

from jigcmd.protocol.inert import one_line

__all__ = ["MESSAGE_CHARS", "OUTPUT_PREFIX", "LiveOutput"]

MESSAGE_CHARS: Final = 160
OUTPUT_PREFIX: Final = "output: "
_LINE_MAX: Final = 4096
# Complete lines kept for the next message, newest last: a line of only escapes or control
# characters cleans to nothing, and the line before it is then the one to show. A bound, so
# a message never cleans more than this many lines.
_RECENT: Final = 8
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]|\x1b\[[0-9;?]*[A-Za-z]")
_ESCAPE: Final = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PASS: Final = b"\n(pass) "
_FAIL: Final = b"\n(fail) "
# What a piece keeps of its end for the next: a mark split across two pieces is counted once.
_CARRY: Final = len(_PASS) - 1


class LiveOutput:
    """The running command's last complete line, and its console's pass/fail lines so far."""

    def __init__(self, *, tests: bool) -> None:
        self._tests = tests
        # Each stream's unterminated line; None when its start was dropped unread.
        self._partial: dict[str, bytes | None] = {}
        # Each stream's last bytes, where a mark may begin (a stream begins as a new line).
        self._carry: dict[str, bytes] = {}
        self._recent: deque[bytes] = deque(maxlen=_RECENT)
        self._shown = ""
        self.passed = 0
        self.failed = 0
        # The streams whose output went uncounted (dropped unread past the cap).
        self._cut: set[str] = set()

    def feed(self, stream: str, chunk: bytes, whole: bool = True) -> None:
        """One piece of output of `stream` ("stdout" or "stderr"); `whole`: nothing was
        dropped between it and the stream's last piece."""
        if not whole:
            self._partial[stream] = None
            self._carry[stream] = b""
            self._cut.add(stream)
        if self._tests and stream not in self._cut:
            probe = self._carry.get(stream, b"\n") + chunk
            self.passed += probe.count(_PASS)
            self.failed += probe.count(_FAIL)
            self._carry[stream] = probe[-_CARRY:]
        partial = self._partial.get(stream, b"")
        end = chunk.rfind(b"\n")
        if end < 0:
            self._partial[stream] = None if partial is None else (partial + chunk)[-_LINE_MAX:]
            return
        self._partial[stream] = chunk[end + 1 :][-_LINE_MAX:]
        self._keep(chunk[:end], partial)

    def _keep(self, body: bytes, partial: bytes | None) -> None:
        """Keep the non-blank ones of the last `_RECENT` lines `body` completes."""
        body = body.rstrip()
        start = len(body)
        for _ in range(_RECENT):
            start = body.rfind(b"\n", 0, start)
            if start < 0:
                break
        lines = body[start + 1 :].split(b"\n")
        if start < 0:
            # The piece's first line ends the stream's unterminated one, unknown if cut.
            first = lines.pop(0)
            if partial is not None:
                lines.insert(0, partial + first)
        for line in lines:
            if line := line.strip():
                self._recent.append(line[-_LINE_MAX:])

    def message(self) -> str:
        """What the next progress notification says."""
        if self._tests and (self.passed or self.failed):
            when = _count_ends(self._cut)
            return (
                f"its console printed {self.passed} '(pass)' and {self.failed} '(fail)' lines "
                f"{when} (not a verified count)"
            )
        # Newest first; what the last message showed stands if every newer line is empty.
        while self._recent:
            shown = _clean(self._recent.pop())
            if shown:
                self._shown = shown
                self._recent.clear()
                break
        return OUTPUT_PREFIX + self._shown if self._shown else "running"


def _count_ends(cut: set[str]) -> str:
    """Where the count stands: each stream's count stops where that stream was cut."""
    if not cut:
        return "so far"
    if len(cut) == 1:
        return f"so far, not counting {next(iter(cut))} past where it was cut"
    return "before its output was cut"


def _clean(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    # The candidate's words in jigcmd's message: inert as a tool result's text shows them.
    text = one_line(_CONTROL.sub("", _ESCAPE.sub("", text)).strip())
    room = MESSAGE_CHARS - len(OUTPUT_PREFIX)
    return text if len(text) <= room else text[: room - 1] + "…"
