"""Line framing: LF-only splitting, reassembly across reads, and oversized frames."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jigcmd.protocol.framing import Frame, LineFramer, Oversized


def test_frames_split_on_lf_only_and_keep_a_carriage_return() -> None:
    """A CR before the LF stays in the frame; a lone CR never ends one."""
    framer = LineFramer()
    assert framer.feed(b'{"a":1}\r\n{"b":\r2}\n') == [Frame(b'{"a":1}\r'), Frame(b'{"b":\r2}')]


def test_a_frame_split_across_reads_is_reassembled() -> None:
    """Bytes of one frame arriving in several reads make one frame."""
    framer = LineFramer()
    assert framer.feed(b'{"a"') == []
    assert framer.pending == 4
    assert framer.feed(b':1}\n{"b"') == [Frame(b'{"a":1}')]
    assert framer.feed(b":2}\n") == [Frame(b'{"b":2}')]


def test_an_oversized_frame_is_reported_once_and_framing_continues() -> None:
    """Bytes beyond the limit are dropped, not buffered, until the next LF; its ends are kept."""
    framer = LineFramer(max_frame_bytes=8)
    assert framer.feed(b"0123456") == []
    assert framer.feed(b"89abcdef") == []
    assert framer.pending == 0
    assert framer.feed(b"ghij") == []
    assert framer.feed(b"k\nok\n") == [
        Oversized(20, b"012345689abcdef", b"012345689abcdefghijk"),
        Frame(b"ok"),
    ]


def test_an_oversized_frame_inside_one_read_is_reported() -> None:
    """A complete frame over the limit in a single read is an oversize event too."""
    framer = LineFramer(max_frame_bytes=4)
    assert framer.feed(b"12345\n1234\n") == [Oversized(5, b"12345", b"12345"), Frame(b"1234")]


def test_an_unterminated_last_frame_is_delivered_at_close() -> None:
    """Input that ends without LF still yields its last frame; blank tails yield nothing."""
    framer = LineFramer()
    framer.feed(b'{"a":1}\n{"b":2}')
    assert framer.close() == [Frame(b'{"b":2}')]
    framer.feed(b"  ")
    assert framer.close() == []


@given(st.lists(st.binary(max_size=20).filter(lambda b: b"\n" not in b), max_size=8), st.data())
def test_any_split_of_the_input_yields_the_same_frames(
    frames: list[bytes], data: st.DataObject
) -> None:
    """However the stream is cut into reads, the frames are the lines between LFs."""
    stream = b"".join(frame + b"\n" for frame in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    framer = LineFramer(max_frame_bytes=10)
    events: list[Frame | Oversized] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        events.extend(framer.feed(stream[start:cut]))
        start = cut
    expected = [Frame(f) if len(f) <= 10 else Oversized(len(f)) for f in frames]
    assert [type(e) for e in events] == [type(e) for e in expected]
    assert [e for e in events if type(e) is Frame] == [e for e in expected if type(e) is Frame]
