"""What a running call's progress says: its last complete line, or the test count so far."""

from __future__ import annotations

import pytest

from jigcmd.protocol import liveoutput
from jigcmd.protocol.liveoutput import MESSAGE_CHARS, LiveOutput


def test_the_last_complete_line_of_either_stream_is_the_message() -> None:
    live = LiveOutput(tests=False)
    assert live.message() == "running"
    live.feed("stdout", b"one\ntw")
    assert live.message() == "output: one"
    live.feed("stderr", b"err line\n")
    live.feed("stdout", b"o\n")
    assert live.message() == "output: two"


def test_control_characters_and_escapes_are_stripped_and_long_lines_cut() -> None:
    live = LiveOutput(tests=False)
    live.feed("stdout", b"\x1b[31mred\x1b[0m\x07 bell\r\n")
    assert live.message() == "output: red bell"
    live.feed("stdout", b"x" * 10_000 + b"\n")
    assert len(live.message()) == MESSAGE_CHARS and live.message().endswith("…")


def test_a_partial_line_is_bounded() -> None:
    live = LiveOutput(tests=False)
    for _ in range(1000):
        live.feed("stdout", b"y" * 1000)
    assert live.message() == "running"
    live.feed("stdout", b"\n")
    assert live.message().startswith("output: yyy")


def _counted(passed: int, failed: int, when: str = "so far") -> str:
    return (
        f"its console printed {passed} '(pass)' and {failed} '(fail)' lines {when} "
        "(not a verified count)"
    )


def test_bun_tests_are_counted_as_the_console_shows_them_and_said_to_be_unverified() -> None:
    live = LiveOutput(tests=True)
    live.feed("stderr", b"(pass) a > b [0.1ms]\n(fail) c\n(pass) d\n(skip) e\n(pa")
    assert live.message() == _counted(2, 1)
    live.feed("stderr", b"ss) f\n")
    assert live.message() == _counted(3, 1)
    live.feed("stdout", b"x (pass) not at a line's start\n")
    assert live.message() == _counted(3, 1)


def test_past_a_gap_the_count_stops_and_a_cut_line_is_not_shown() -> None:
    """Output dropped unread past the cap: counting it on would be a guess; so would a line
    whose start was dropped."""
    live = LiveOutput(tests=True)
    live.feed("stderr", b"(pass) a\nhead of a line")
    live.feed("stderr", b"ss) b\n(pass) c\nlast whole line\n", False)
    assert live.message() == _counted(1, 0, "so far, not counting stderr past where it was cut")
    plain = LiveOutput(tests=False)
    plain.feed("stdout", b"kept\nhead of a line")
    plain.feed("stdout", b"end of another\n", False)
    assert plain.message() == "output: kept"
    plain.feed("stdout", b"b\nnext\n\n", False)
    assert plain.message() == "output: next"


def test_a_flood_of_short_lines_costs_a_few_bulk_operations_a_piece(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No Python step per line: a line is cleaned only when a message is made."""
    cleaned: list[bytes] = []
    clean = liveoutput._clean

    def counted(raw: bytes) -> str:
        cleaned.append(raw)
        return clean(raw)

    monkeypatch.setattr(liveoutput, "_clean", counted)
    live = LiveOutput(tests=True)
    for _ in range(16):
        live.feed("stdout", b"x\n" * 32768)
    assert cleaned == []
    assert live.message() == "output: x"
    assert cleaned == [b"x"]


def test_a_cut_on_one_stream_leaves_the_other_counted_and_names_the_cut_one() -> None:
    """Bun prints `(pass)` on stderr: console noise dropped past stdout's cap stops nothing."""
    live = LiveOutput(tests=True)
    live.feed("stderr", b"(pass) a\n")
    live.feed("stdout", b"debug noise\n", False)
    live.feed("stdout", b"(pass) dropped from view on stdout\n", False)
    live.feed("stderr", b"(pass) b\n(fail) c\n")
    assert live.message() == _counted(2, 1, "so far, not counting stdout past where it was cut")
    live.feed("stderr", b"(pass) d\n", False)
    assert live.message() == _counted(2, 1, "before its output was cut")


def test_a_count_begun_after_the_other_stream_was_cut_is_still_made() -> None:
    """Noise first: stdout is cut before stderr prints its first `(pass)`."""
    live = LiveOutput(tests=True)
    live.feed("stdout", b"noise\n", False)
    live.feed("stderr", b"(pass) a\n(pass) b\n")
    assert live.message() == _counted(2, 0, "so far, not counting stdout past where it was cut")


def test_a_line_that_cleans_to_nothing_leaves_the_last_line_that_says_something() -> None:
    """A colour reset on its own line after the real one, in the same read or the next."""
    live = LiveOutput(tests=False)
    live.feed("stdout", b"compiling step 7 of 9\n\x1b[0m\n")
    assert live.message() == "output: compiling step 7 of 9"
    live.feed("stdout", b"linking\n")
    live.feed("stderr", b"\x07\n")
    live.feed("stdout", b"\x1b[2K\x1b[1G\n")
    assert live.message() == "output: linking"
    live.feed("stdout", b"\x1b[0m\n")
    assert live.message() == "output: linking"


def test_a_line_ending_a_stream_s_unterminated_one_is_found_behind_empty_ones() -> None:
    live = LiveOutput(tests=False)
    live.feed("stdout", b"hal")
    live.feed("stdout", b"f a line\n\x1b[0m\n\x1b[0m\n")
    assert live.message() == "output: half a line"


def test_blank_lines_after_the_last_line_hide_nothing() -> None:
    live = LiveOutput(tests=False)
    live.feed("stdout", b"done\n" + b" \r\n" * 100)
    assert live.message() == "output: done"


def test_a_flood_of_lines_that_clean_to_nothing_is_cleaned_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Walking back to a line worth showing stops after a few lines, never per line."""
    cleaned: list[bytes] = []
    clean = liveoutput._clean

    def counted(raw: bytes) -> str:
        cleaned.append(raw)
        return clean(raw)

    monkeypatch.setattr(liveoutput, "_clean", counted)
    live = LiveOutput(tests=False)
    live.feed("stdout", b"before the flood\n")
    assert live.message() == "output: before the flood"
    for _ in range(16):
        live.feed("stdout", b"\x1b[0m\n" * 16384)
    cleaned.clear()
    assert live.message() == "output: before the flood"
    assert 0 < len(cleaned) <= 16
    cleaned.clear()
    assert live.message() == "output: before the flood"
    assert cleaned == []
