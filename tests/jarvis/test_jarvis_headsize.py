"""The request head's size, measured on the bytes as they arrive (`jigcmd.jarvis.headsize`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jigcmd.jarvis.headsize import HeadSize


def _fed(pieces: list[bytes], limit: int) -> bool:
    meter = HeadSize(limit)
    return all([meter.feed(piece) for piece in pieces])


def test_a_complete_head_read_whole_is_measured_to_its_empty_line() -> None:
    """At the limit it passes, one byte over it does not; the body after it never counts."""
    head = b"POST / HTTP/1.1\r\nHost: x\r\n\r\n"
    assert _fed([head + b"b" * 1000], len(head))
    assert not _fed([head + b"b" * 1000], len(head) - 1)


def test_a_head_without_its_end_is_over_once_it_passes_the_limit() -> None:
    """Incomplete: every byte so far counts."""
    meter = HeadSize(10)
    assert meter.feed(b"GET / HTTP")
    assert not meter.feed(b"/")


def test_bare_line_feeds_end_a_head_as_h11_reads_them() -> None:
    """`\\n\\n` ends a head too."""
    assert _fed([b"GET / HTTP/1.1\nHost: x\n\n" + b"b" * 100], 25)


def test_the_next_head_is_measured_afresh_after_a_reset() -> None:
    """A keep-alive connection's second request starts from zero."""
    meter = HeadSize(30)
    assert meter.feed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    meter.reset()
    assert not meter.feed(b"GET / HTTP/1.1\r\nHost: " + b"x" * 30)


@given(
    head=st.binary(max_size=80).map(lambda b: b.replace(b"\n", b"")),
    ending=st.sampled_from([b"\r\n\r\n", b"\n\n", b"\n\r\n", b""]),
    rest=st.binary(max_size=40),
    limit=st.integers(min_value=0, max_value=130),
    cuts=st.lists(st.integers(min_value=0, max_value=130), max_size=8),
)
def test_the_verdict_is_the_same_however_the_bytes_are_split(
    head: bytes, ending: bytes, rest: bytes, limit: int, cuts: list[int]
) -> None:
    """Read whole or in any pieces (the end straddling two of them), the same answer."""
    data = head + ending + rest
    if not ending:
        data = head
    points = sorted({min(c, len(data)) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    whole = len(head) + len(ending) if ending else len(data)
    assert _fed(pieces, limit) == (whole <= limit)
