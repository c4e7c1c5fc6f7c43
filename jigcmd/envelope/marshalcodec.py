"""The zygote's and pid 1's codec of the control channel: `records`, the standard library alone.

Its readers and writers are Python generated and compiled from the message types, once, as
the zygote imports this module, so that every pid 1 is cloned with them. The server never
imports it: it reads and writes the same frames with msgspec (`jigcmd.envelope.wire`), so
generating and compiling these readers would only lengthen its start.
"""

from __future__ import annotations

from jigcmd.envelope import records
from jigcmd.envelope.messages import TAGS, Codec, Message

__all__ = ["MARSHAL"]


class _Marshal:
    """Frames as `records` writes them, every field checked by a generated reader."""

    def __init__(self) -> None:
        self._readers = {tag: records.Reader[Message](kind) for tag, kind in TAGS.items()}
        self._writers = {kind: (tag, records.Writer[Message](kind)) for tag, kind in TAGS.items()}

    def encode(self, message: Message) -> bytes:
        tag, writer = self._writers[type(message)]
        return records.dumps_plain((tag, writer.plain(message)))

    def decode(self, body: bytes) -> Message:
        framed = records.loads(body)
        if isinstance(framed, tuple) and len(framed) == 2 and isinstance(framed[0], str):
            reader = self._readers.get(framed[0])
            if reader is not None:
                return reader.convert(framed[1])
        raise records.FrameError(f"not a (tag, fields) frame of a known tag: {framed!r:.60}")


MARSHAL: Codec = _Marshal()
