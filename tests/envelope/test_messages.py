"""The control-socket frames: one bound, either codec, and what one side writes the other reads."""

from __future__ import annotations

import marshal
import socket
import struct

import pytest

from jigcmd.envelope import records
from jigcmd.envelope.marshalcodec import MARSHAL
from jigcmd.envelope.messages import (
    Answered,
    Cancel,
    Codec,
    Ended,
    Failed,
    Finished,
    FrameReader,
    Go,
    Launch,
    Message,
    Ready,
    Started,
    Warm,
    recv_message,
    send_message,
)
from jigcmd.envelope.scratchfile import ScratchRead
from jigcmd.envelope.wire import MSGSPEC
from jigcmd.journal.identity import ProcessIdentity
from jigcmd.plan import Bind, Limits, RunPlan, ScratchFile

_OVER_BOUND = 8 * 1024 * 1024 + 1
CODECS = pytest.mark.parametrize("codec", [MARSHAL, MSGSPEC], ids=["marshal", "msgspec"])

PLAN = RunPlan(
    profile="candidate",
    argv=("/usr/bin/bun", "test"),
    env=(("PATH", "/usr/bin"), ("LANG", "C.UTF-8")),
    cwd="/work",
    binds=(Bind(source="/opt/bun", target="/usr/bin/bun", staged=True),),
    files=(("a.test.ts", "héllo\n" * 100), ("b.ts", "")),
    stdin=b"\x00\xff" * 40,
    limits=Limits(memory_bytes=2**40, pids_max=7),
    deadline=12345.678,
    cpus=(0, 1),
    scratch_file=ScratchFile(name="junit.xml", max_bytes=1 << 20),
    program="/opt/bun/bin/bun",
)
GO = Go(
    argv=PLAN.argv,
    env=PLAN.env,
    cwd=PLAN.cwd,
    files=PLAN.files,
    cpus=PLAN.cpus,
    program=PLAN.program,
)
EVERY_MESSAGE: tuple[Message, ...] = (
    Launch(run_id="r1", plan=PLAN, operation_id="op", root_run="root", state_dir="/s"),
    Launch(run_id="r2", plan=PLAN._replace(scratch_file=None, cpus=())),
    Warm(plan=PLAN, pool=2),
    Warm(plan=PLAN, pool=2, refill_after_ms=0.5),
    Answered(),
    Ready(envelope_id="e", supervisor=ProcessIdentity(1, 2**40, "boot"), cgroup_paths=("/a",)),
    Ready(envelope_id="e", supervisor=None, cgroup_paths=()),
    GO,
    GO._replace(files=(), cpus=()),
    Cancel(),
    Cancel("deadline"),
    Started(supervisor_pid=3, init_pid=-4, cgroup_paths=("/x", "/y"), netns="n", setup_ms=1.5),
    Ended(exit_code=None, signal="SIGKILL", stop_reason="deadline"),
    Finished(
        exit_code=0,
        signal=None,
        stop_reason="exited",
        wall_ms=12.0,
        cpu_ms=None,
        peak_memory_bytes=2**33,
        oom_killed=False,
        pids_limit_hit=True,
        cleanup_complete=True,
        cleanup_problems=("one", "two"),
        scratch_file=ScratchRead(data=b"<xml/>" * 10_000),
    ),
    Failed(step="pid 1", error="gone", cleanup_complete=False),
)


def _frames(codec: Codec, *messages: Message) -> bytes:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        for message in messages:
            send_message(ours, message, codec=codec)
        ours.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := theirs.recv(65536):
            data += chunk
    return data


@pytest.mark.parametrize("reader", [MARSHAL, MSGSPEC], ids=["to-marshal", "to-msgspec"])
@pytest.mark.parametrize("writer", [MARSHAL, MSGSPEC], ids=["from-marshal", "from-msgspec"])
@pytest.mark.parametrize("message", EVERY_MESSAGE, ids=lambda m: type(m).__name__)
def test_every_message_written_by_either_side_reads_back_equal_on_the_other(
    message: Message, writer: Codec, reader: Codec
) -> None:
    """The zygote's stdlib codec and the server's msgspec one agree on every message type."""
    decoded = reader.decode(writer.encode(message))
    assert decoded == message
    assert type(decoded) is type(message)


@CODECS
@pytest.mark.parametrize(
    "fields",
    [
        ["r", (), None, "", None],  # the plan is not a plan
        ["r", PLAN[:5]],  # a plan missing required fields
        ["r", (*PLAN, "extra")],  # a field the type does not have
    ],
    ids=["not-a-plan", "short-plan", "long-plan"],
)
def test_a_launch_whose_fields_do_not_match_the_types_is_refused(
    codec: Codec, fields: list[object]
) -> None:
    """A wrong or missing field, or one too many, is a ValueError: no message comes out."""
    body = records.dumps(("launch", tuple(fields)))
    with pytest.raises(ValueError, match=r"\S"):
        codec.decode(body)


@CODECS
def test_a_wrongly_typed_field_deep_in_the_plan_is_refused(codec: Codec) -> None:
    """An argv item that is not a string fails the frame, and the error says what was expected."""
    plan: list[object] = list(PLAN)
    plan[1] = ("/usr/bin/bun", 7)
    launch: list[object] = list(Launch(run_id="r", plan=PLAN))
    launch[1] = tuple(plan)
    with pytest.raises(ValueError, match=r"(?i)expected .*str"):
        codec.decode(records.dumps(("launch", tuple(launch))))


@CODECS
@pytest.mark.parametrize(
    "body",
    [
        b"",
        records.dumps(("go", GO))[:-3],
        marshal.dumps(("nope", ())),
        marshal.dumps(("go",)),
        marshal.dumps((1, ())),
        marshal.dumps(["cancel", ()]),
        marshal.dumps(("cancel", {})),
        marshal.dumps(compile("1", "x", "eval")),
    ],
    ids=["empty", "truncated", "unknown-tag", "no-fields", "no-tag", "a-list", "a-dict", "code"],
)
def test_a_garbled_body_is_a_value_error(codec: Codec, body: bytes) -> None:
    """Truncated, unknown, malformed or followed by junk: refused whole."""
    with pytest.raises(ValueError, match=r"\S"):
        codec.decode(body)


@CODECS
def test_a_frame_fed_a_byte_at_a_time_comes_out_once_whole(codec: Codec) -> None:
    """Nothing until the last byte of the frame, then the message, then nothing again."""
    data = _frames(codec, Cancel())
    reader = FrameReader(codec)
    for byte in data[:-1]:
        reader.feed(bytes([byte]))
        assert reader.next() is None
    reader.feed(data[-1:])
    assert reader.next() == Cancel()
    assert reader.next() is None


@CODECS
def test_two_frames_in_one_read_come_out_in_order(codec: Codec) -> None:
    """A read that holds two frames yields both, one per call."""
    reader = FrameReader(codec)
    reader.feed(_frames(codec, Cancel(), GO) + b"\x00")
    assert [reader.next(), reader.next(), reader.next()] == [Cancel(), GO, None]


@CODECS
def test_an_oversized_length_is_refused_as_soon_as_the_header_arrives(codec: Codec) -> None:
    """The reader does not buffer 8 MiB waiting for a body it will refuse anyway."""
    reader = FrameReader(codec)
    reader.feed(struct.pack(">I", _OVER_BOUND))
    with pytest.raises(ValueError, match="exceeds"):
        reader.next()


@CODECS
def test_the_blocking_reader_has_the_same_bound(codec: Codec) -> None:
    """recv_message refuses the same header with the same error."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        ours.sendall(struct.pack(">I", _OVER_BOUND))
        with pytest.raises(ValueError, match="exceeds"):
            recv_message(theirs, codec=codec)
