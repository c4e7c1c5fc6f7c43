"""The server's side of a run against a stand-in supervisor: reports, output, cancel, hooks.

The supervisor's end of the run socket and the candidate's ends of the output pipes are
driven by the test, so each ordering the collector must survive is made to happen, not
hoped for.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import cast

import anyio
import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.envelope.api import Ending, EnvelopeFailure, FailureKind, Hooks
from jigcmd.envelope.collection import RunCollector
from jigcmd.envelope.messages import (
    Cancel,
    Ended,
    Finished,
    FrameReader,
    Message,
    Started,
    send_message,
)
from jigcmd.envelope.wire import MSGSPEC
from jigcmd.plan import RunPlan

_FAILSAFE_S = 10.0
_STARTED = Started(supervisor_pid=1, init_pid=2, cgroup_paths=(), netns="", setup_ms=1.0)
_ENDED = Ended(exit_code=3, signal=None, stop_reason="exited")
_FINISHED = Finished(
    exit_code=3,
    signal=None,
    stop_reason="exited",
    wall_ms=5.0,
    cpu_ms=4.0,
    peak_memory_bytes=1 << 20,
    oom_killed=False,
    pids_limit_hit=False,
    cleanup_complete=True,
)


@dataclass
class _Supervisor:
    """The far ends: the run socket's and the candidate's stdout and stderr."""

    sock: socket.socket
    stdout_w: int
    stderr_w: int
    closed: set[int] = field(default_factory=set)

    def report(self, *messages: Message) -> None:
        for message in messages:
            send_message(self.sock, message, codec=MSGSPEC)

    def print(self, stdout: bytes = b"", stderr: bytes = b"") -> None:
        """Write and close both pipes, as a candidate that ends does."""
        for fd, data in ((self.stdout_w, stdout), (self.stderr_w, stderr)):
            if data:
                os.write(fd, data)
            self._close(fd)

    def close(self) -> None:
        self._close(self.stdout_w)
        self._close(self.stderr_w)
        self.sock.close()

    def _close(self, fd: int) -> None:
        if fd not in self.closed:
            self.closed.add(fd)
            os.close(fd)


@asynccontextmanager
async def _run(
    hooks: Hooks | None = None, cancel: CancelSignal | None = None
) -> AsyncIterator[tuple[RunCollector, _Supervisor]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    plan = cast("RunPlan", SimpleNamespace(deadline=time.monotonic() + 30))
    collector = RunCollector(
        plan,
        sock=ours,
        stdout_r=stdout_r,
        stderr_r=stderr_r,
        cancel=cancel or CancelSignal(),
        hooks=hooks or Hooks(),
    )
    supervisor = _Supervisor(theirs, stdout_w, stderr_w)
    try:
        yield collector, supervisor
    finally:
        supervisor.close()


async def test_reports_that_came_before_the_sockets_end_are_all_read() -> None:
    """The end's hook is still busy when the last report and the socket's EOF arrive."""
    seen: list[Ending] = []

    async def on_ended(ending: Ending) -> None:
        # Meanwhile the loop reads the last report, then the EOF, off the socket.
        await anyio.sleep(0.05)
        seen.append(ending)

    async with _run(Hooks(on_ended=on_ended)) as (collector, supervisor):
        supervisor.print(b"out", b"err")
        supervisor.report(_STARTED, _ENDED, _FINISHED)
        supervisor.sock.close()
        with anyio.fail_after(_FAILSAFE_S):
            outcome = await collector.collect()
    assert (outcome.exit_code, outcome.stop_reason) == (3, "exited")
    assert (outcome.stdout.data, outcome.stderr.data) == (b"out", b"err")
    assert outcome.report.cpu_ms == 4.0
    assert [(e.exit_code, e.stdout.data) for e in seen] == [(3, b"out")]


async def test_a_garbled_report_stops_the_reports() -> None:
    async with _run() as (collector, supervisor):
        supervisor.report(_STARTED)
        supervisor.sock.sendall(b"\x00\x00\x00\x03xyz")
        with anyio.fail_after(_FAILSAFE_S), pytest.raises(EnvelopeFailure) as failed:
            await collector.collect()
    assert failed.value.kind == FailureKind.REPORTS_STOPPED


async def test_the_callers_cancel_reaches_the_supervisor_while_the_candidate_runs() -> None:
    cancel = CancelSignal()
    async with _run(cancel=cancel) as (collector, supervisor):
        supervisor.report(_STARTED)
        async with anyio.create_task_group() as tg:
            result: list[object] = []

            async def collect() -> None:
                result.append(await collector.collect())

            tg.start_soon(collect)
            cancel.set()
            frames = FrameReader(MSGSPEC)
            with anyio.fail_after(_FAILSAFE_S):
                await anyio.wait_readable(supervisor.sock)
            frames.feed(supervisor.sock.recv(4096))
            assert frames.next() == Cancel()
            stopped = _ENDED._replace(exit_code=None, signal="SIGKILL", stop_reason="cancelled")
            supervisor.print()
            supervisor.report(
                stopped,
                _FINISHED._replace(exit_code=None, signal="SIGKILL", stop_reason="cancelled"),
            )
    (outcome,) = result
    assert getattr(outcome, "stop_reason", None) == "cancelled"


async def test_a_run_is_collected_without_a_task() -> None:
    """The socket, the pipes and the cancel call back: the collecting task is the only one."""
    tasks: list[int] = []

    async def on_ended(_ending: Ending) -> None:
        tasks.append(len(anyio.get_running_tasks()))

    before = len(anyio.get_running_tasks())
    async with _run(Hooks(on_ended=on_ended), CancelSignal()) as (collector, supervisor):
        supervisor.print(b"out")
        supervisor.report(_STARTED, _ENDED, _FINISHED)
        with anyio.fail_after(_FAILSAFE_S):
            await collector.collect()
    assert tasks == [before]


async def test_output_that_never_ends_leaves_no_reader_behind() -> None:
    """A report of the end while a writer still holds the pipe: truncated after the drain."""
    async with _run() as (collector, supervisor):
        os.write(supervisor.stdout_w, b"partial")
        supervisor.report(_STARTED, _ENDED, _FINISHED)
        with anyio.fail_after(_FAILSAFE_S):
            outcome = await collector.collect()
    assert outcome.stdout.data == b"partial"
    assert outcome.stdout.truncated  # EOF never came
