"""What a running call's progress says: its last complete line, or the test count so far."""

from __future__ import annotations

from jigcmd.protocol.liveoutput import MESSAGE_CHARS, LiveOutput


def test_the_last_complete_line_of_either_stream_is_the_message() -> None:
    live = LiveOutput(tests=False)
    assert live.message() == "running"
    live.feed("stdout", b"one\ntw")
    assert live.message() == "one"
    live.feed("stderr", b"err line\n")
    live.feed("stdout", b"o\n")
    assert live.message() == "two"


def test_control_characters_and_escapes_are_stripped_and_long_lines_cut() -> None:
    live = LiveOutput(tests=False)
    live.feed("stdout", b"\x1b[31mred\x1b[0m\x07 bell\r\n")
    assert live.message() == "red bell"
    live.feed("stdout", b"x" * 10_000 + b"\n")
    assert len(live.message()) == MESSAGE_CHARS and live.message().endswith("…")


def test_a_partial_line_is_bounded() -> None:
    live = LiveOutput(tests=False)
    for _ in range(1000):
        live.feed("stdout", b"y" * 1000)
    assert live.message() == "running"
    live.feed("stdout", b"\n")
    assert live.message().startswith("yyy")


def test_bun_tests_are_counted_as_the_console_shows_them() -> None:
    live = LiveOutput(tests=True)
    live.feed("stderr", b"(pass) a > b [0.1ms]\n(fail) c\n(pass) d\n(skip) e\n(pass) ")
    assert live.message() == "2 passed, 1 failed so far"
    live.feed("stderr", b"f\n")
    assert live.message() == "3 passed, 1 failed so far"
