"""The control-socket frame codec: one bound, whether frames arrive whole or in pieces."""

from __future__ import annotations

import socket
import struct

import pytest

from jigcmd.envelope.messages import Cancel, FrameReader, Message, recv_message, send_message

_OVER_BOUND = 8 * 1024 * 1024 + 1


def _frames(*messages: Message) -> bytes:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        for message in messages:
            send_message(ours, message)
        ours.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := theirs.recv(65536):
            data += chunk
    return data


def test_a_frame_fed_a_byte_at_a_time_comes_out_once_whole() -> None:
    """Nothing until the last byte of the frame, then the message, then nothing again."""
    data = _frames(Cancel())
    reader = FrameReader()
    for byte in data[:-1]:
        reader.feed(bytes([byte]))
        assert reader.next() is None
    reader.feed(data[-1:])
    assert reader.next() == Cancel()
    assert reader.next() is None


def test_two_frames_in_one_read_come_out_in_order() -> None:
    """A read that holds two frames yields both, one per call."""
    reader = FrameReader()
    reader.feed(_frames(Cancel(), Cancel()) + b"\x00")
    assert [reader.next(), reader.next(), reader.next()] == [Cancel(), Cancel(), None]


def test_an_oversized_length_is_refused_as_soon_as_the_header_arrives() -> None:
    """The reader does not buffer 8 MiB waiting for a body it will refuse anyway."""
    reader = FrameReader()
    reader.feed(struct.pack(">I", _OVER_BOUND))
    with pytest.raises(ValueError, match="exceeds"):
        reader.next()


def test_the_blocking_reader_has_the_same_bound() -> None:
    """recv_message refuses the same header with the same error."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(struct.pack(">I", _OVER_BOUND))
        with pytest.raises(ValueError, match="exceeds"):
            recv_message(theirs)
