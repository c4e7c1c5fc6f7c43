"""The server's codec of the control channel: the same frames as the zygote's, through msgspec.

The zygote reads and writes them with the standard library (`messages.PACKED`), so that
msgspec stays out of the image every pid 1 is cloned from; the server has msgspec anyway,
and its encoder and decoders are a few microseconds per frame where `packing` is pure
Python. A frame is `[tag, fields]`; msgspec cannot tell NamedTuples apart in a union (they
are all arrays), so the tag is decoded first and the fields then with that message's type,
every one checked.
"""

from __future__ import annotations

import msgspec

from jigcmd.envelope.messages import TAGS, Codec, Message, tag_of

__all__ = ["MSGSPEC"]


class _Msgspec:
    def __init__(self) -> None:
        self._encoder = msgspec.msgpack.Encoder()
        self._framed = msgspec.msgpack.Decoder(tuple[str, msgspec.Raw])
        self._decoders = {tag: msgspec.msgpack.Decoder(kind) for tag, kind in TAGS.items()}

    def encode(self, message: Message) -> bytes:
        return self._encoder.encode((tag_of(message), message))

    def decode(self, body: bytes) -> Message:
        tag, fields = self._framed.decode(body)
        decoder = self._decoders.get(tag)
        if decoder is None:
            raise msgspec.ValidationError(f"unknown message tag {tag!r:.40}")
        message: Message = decoder.decode(fields)
        return message


MSGSPEC: Codec = _Msgspec()
