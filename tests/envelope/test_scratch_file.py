"""The plan's scratch file read back after the run, and the output forwarded while it runs.

The scratch belongs to the candidate: every hostile shape of the file is answered with the
reason nothing was read, never a host file, never a hang, never a crash.
"""

from __future__ import annotations

import os
import time

import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.envelope.scratchfile import read_scratch_file, valid_name
from jigcmd.plan import ScratchFile
from tests.envelope.hostile_harness import DEADLINE_S, TracedExecutor, probe_plan

_CAP = 4096


def _with_report(source: str, *, seconds: float = 10.0, name: str = "report.xml") -> object:
    plan = probe_plan(source, seconds=seconds)
    return plan._replace(scratch_file=ScratchFile(name=name, max_bytes=_CAP))


# -- the reader on its own (a directory of ours standing in for the scratch) -------------


@pytest.fixture
def scratch(tmp_path: os.PathLike[str]) -> object:
    fd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    yield tmp_path, fd
    os.close(fd)


def test_a_regular_file_within_the_bound_is_read_whole(scratch: tuple[str, int]) -> None:
    path, fd = scratch
    with open(os.path.join(path, "r.xml"), "wb") as handle:
        handle.write(b"<testsuites/>")
    read = read_scratch_file(fd, ScratchFile("r.xml", _CAP))
    assert (read.data, read.problem) == (b"<testsuites/>", "")


def _write(path: str, size: int) -> None:
    with open(path, "wb") as handle:
        handle.write(b"x" * size)


def _sparse(path: str) -> None:
    with open(path, "wb") as handle:
        handle.truncate(10 << 30)


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        pytest.param(lambda p: None, "missing", id="missing"),
        pytest.param(lambda p: os.symlink("/etc/passwd", p), "a symbolic link", id="symlink"),
        pytest.param(os.mkfifo, "not a regular file", id="fifo"),
        pytest.param(os.mkdir, "not a regular file", id="directory"),
        pytest.param(lambda p: _write(p, _CAP + 1), "larger than 4096", id="too-large"),
        pytest.param(_sparse, "larger than 4096", id="sparse"),
    ],
)
def test_every_other_shape_is_named_and_nothing_is_read(
    scratch: tuple[str, int], make: object, problem: str
) -> None:
    path, fd = scratch
    make(os.path.join(path, "r.xml"))  # type: ignore[operator]
    read = read_scratch_file(fd, ScratchFile("r.xml", _CAP))
    assert read.data is None
    assert read.problem.startswith(problem), read.problem


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../etc/passwd", "/etc/passwd", "a\0b"])
def test_a_name_that_is_not_one_component_is_refused(scratch: tuple[str, int], name: str) -> None:
    assert not valid_name(name)
    read = read_scratch_file(scratch[1], ScratchFile(name, _CAP))
    assert read.data is None and "one path component" in read.problem


# -- in a real envelope -----------------------------------------------------------------


@pytest.mark.envelope
async def test_the_file_the_candidate_wrote_comes_back(envelope: TracedExecutor) -> None:
    source = 'await Bun.write("/tmp/report.xml", "<testsuites tests=\\"1\\"/>");\n'
    outcome = await envelope.run(_with_report(source))  # type: ignore[arg-type]
    assert outcome.exit_code == 0
    assert outcome.scratch_file is not None
    assert outcome.scratch_file.data == b'<testsuites tests="1"/>'


@pytest.mark.envelope
@pytest.mark.parametrize(
    ("source", "problem"),
    [
        pytest.param("", "missing", id="missing"),
        pytest.param(
            'import { symlinkSync } from "node:fs";\n'
            'symlinkSync("/etc/shadow", "/tmp/report.xml");\n',
            "a symbolic link",
            id="symlink-to-host-file",
        ),
        pytest.param(
            'import { symlinkSync } from "node:fs"; symlinkSync("/proc/1/root/etc/passwd",'
            ' "/tmp/report.xml");\n',
            "a symbolic link",
            id="symlink-through-proc",
        ),
        pytest.param(
            'import { mkdirSync } from "node:fs"; mkdirSync("/tmp/report.xml");\n',
            "not a regular file",
            id="directory",
        ),
        pytest.param(
            'import { dlopen, FFIType } from "bun:ffi";\n'
            'const { symbols } = dlopen("libc.so.6", '
            "{ mkfifo: { args: [FFIType.cstring, FFIType.u32], returns: FFIType.i32 } });\n"
            'const path = Buffer.from("/tmp/report.xml\\0");\n'
            "if (symbols.mkfifo(path, 0o666) !== 0) throw new Error('mkfifo failed');\n",
            "not a regular file",
            id="fifo",
        ),
        pytest.param(
            'await Bun.write("/tmp/report.xml", "x".repeat(4097));\n',
            "larger than 4096",
            id="too-large",
        ),
    ],
)
async def test_a_hostile_scratch_file_is_refused_with_its_reason(
    envelope: TracedExecutor, source: str, problem: str
) -> None:
    outcome = await envelope.run(_with_report(source))  # type: ignore[arg-type]
    assert outcome.scratch_file is not None
    assert outcome.scratch_file.data is None
    assert outcome.scratch_file.problem.startswith(problem), outcome.scratch_file.problem


@pytest.mark.envelope
async def test_a_plan_without_a_scratch_file_gets_none(envelope: TracedExecutor) -> None:
    outcome = await envelope.run(probe_plan('await Bun.write("/tmp/report.xml", "x");\n'))
    assert outcome.scratch_file is None


@pytest.mark.envelope
async def test_a_killed_run_still_has_its_file_read(envelope: TracedExecutor) -> None:
    source = 'await Bun.write("/tmp/report.xml", "partial");\nfor (;;) {}\n'
    outcome = await envelope.run(_with_report(source, seconds=DEADLINE_S))  # type: ignore[arg-type]
    assert outcome.stop_reason == "deadline"
    assert outcome.scratch_file is not None and outcome.scratch_file.data == b"partial"


@pytest.mark.envelope
async def test_output_is_forwarded_while_the_candidate_runs(envelope: TracedExecutor) -> None:
    """The callback sees a line of a candidate that then blocks for good: it cancels the run.

    Only output forwarded while the candidate runs can end it as "cancelled"; output seen only
    at the end would leave it to the deadline.
    """
    cancel = CancelSignal()
    seen: list[tuple[str, bytes]] = []

    def on_output(name: str, chunk: bytes, _whole: bool) -> None:
        seen.append((name, chunk))
        if b"first line" in b"".join(c for n, c in seen if n == "stderr"):
            cancel.set()

    source = 'console.error("first line");\nawait Bun.sleep(1e9);\n'
    begin = time.monotonic()
    outcome = await envelope.run(probe_plan(source, seconds=30.0), cancel, on_output=on_output)
    assert outcome.stop_reason == "cancelled", (outcome, time.monotonic() - begin)
    assert outcome.stderr.data == b"first line\n"
    assert b"".join(c for n, c in seen if n == "stderr") == b"first line\n"
