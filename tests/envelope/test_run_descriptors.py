"""A run's descriptors: when the server runs out of them, nothing runs and none stays open.

`NativeExecutor.execute` makes four pipes and a socket pair before it hands a launch to the
zygote. Any of those can fail (`EMFILE` on a busy server); the ones already made must be
closed, or every refused call would leak descriptors until the server itself stops working,
and the caller hears that nothing ran. No zygote is needed: the failure comes before the
launch.
"""

from __future__ import annotations

import errno
import os
import socket
import time

import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.command.failures import envelope_error
from jigcmd.command.runtime import BUN_TARGET
from jigcmd.envelope.api import EnvelopeFailure
from jigcmd.envelope.native import NativeExecutor
from jigcmd.errors import Code
from jigcmd.plan import RunPlan
from jigcmd.policy.planner import candidate_plan


def _plan() -> RunPlan:
    return candidate_plan(
        bun=BUN_TARGET,
        runtime_binds=(),
        kind="run",
        paths=["main.ts"],
        args=[],
        files=(("main.ts", "console.log(1);\n"),),
        stdin="input for the candidate\n",
        deadline=time.monotonic() + 10,
    )


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _exhausted() -> OSError:
    return OSError(errno.EMFILE, os.strerror(errno.EMFILE))


async def _execute_fails() -> None:
    executor = NativeExecutor()
    before = _open_fds()
    with pytest.raises(EnvelopeFailure) as raised:
        await executor.execute(_plan(), CancelSignal())
    error = envelope_error(raised.value)
    assert error.code == Code.EXECUTION_FAILED
    assert error.message == (
        "containment envelope incomplete, nothing ran: run pipes: "
        f"[Errno {errno.EMFILE}] {os.strerror(errno.EMFILE)}"
    )
    # The listing's own descriptor comes and goes: compare what stays.
    assert _open_fds() == before
    await executor.aclose()


async def test_no_socket_pair_leaves_none_of_the_runs_pipes_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run socket fails after its four pipes (and the input's write): all eight close."""

    def socketpair(*_args: object) -> tuple[socket.socket, socket.socket]:
        raise _exhausted()

    monkeypatch.setattr(socket, "socketpair", socketpair)
    await _execute_fails()


async def test_a_pipe_that_cannot_be_made_leaves_none_of_the_others_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The third pipe fails: the two made before it close."""
    made = 0
    real = os.pipe2

    def pipe2(flags: int) -> tuple[int, int]:
        nonlocal made
        made += 1
        if made == 3:
            raise _exhausted()
        return real(flags)

    monkeypatch.setattr(os, "pipe2", pipe2)
    await _execute_fails()
    assert made == 3
