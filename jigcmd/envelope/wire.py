"""The server's codec of the control channel: the zygote's frames, checked by msgspec.

The zygote reads and writes frames with `marshal` and its own generated readers
(`marshalcodec.MARSHAL`), so that msgspec stays out of the image every pid 1 is cloned from.
The server has msgspec anyway: it writes a message as the plain tuples of its fields
(`to_builtins`, C) in `marshal` (C), and reads one back with `marshal` and `msgspec.convert`,
which checks every field against the message's type (C, where the zygote's check is Python).
"""

from __future__ import annotations

import marshal

import msgspec

from jigcmd.envelope.messages import TAGS, Codec, Message, tag_of
from jigcmd.envelope.records import VERSION

__all__ = ["MSGSPEC", "argument"]


def argument(value: object) -> str:
    """`value` as a command-line argument the zygote reads (`records.Reader`, from hex)."""
    return marshal.dumps(msgspec.to_builtins(value, builtin_types=(bytes,)), VERSION).hex()


class _Msgspec:
    def encode(self, message: Message) -> bytes:
        fields = msgspec.to_builtins(message, builtin_types=(bytes,))
        return marshal.dumps((tag_of(message), fields), VERSION)

    def decode(self, body: bytes) -> Message:
        try:
            # The zygote's frames (records.py says why marshal); msgspec checks what it holds.
            framed = marshal.loads(body)  # noqa: S302 - see the comment above
        except (ValueError, EOFError, TypeError) as exc:
            raise msgspec.DecodeError(f"not a frame: {exc}") from None
        if not (isinstance(framed, tuple) and len(framed) == 2 and framed[0] in TAGS):
            raise msgspec.ValidationError(
                f"not a (tag, fields) frame of a known tag: {framed!r:.60}"
            )
        message: Message = msgspec.convert(framed[1], TAGS[framed[0]])
        return message


MSGSPEC: Codec = _Msgspec()
