"""The gate: a launch is staged while the caller commits, and the candidate starts only after.

The executor hands the launch to a prepared envelope, which writes the candidate files and
arms the candidate, while `admit` (the server's journal commit) runs; the candidate execs
only when `admit` says yes. These tests prove the order and every way of saying no.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import AsyncIterator

import anyio
import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.command.failures import envelope_error
from jigcmd.envelope.api import (
    Assigned,
    EnvelopeFailure,
    EnvelopeIdentity,
    FailureKind,
    Hooks,
    Ticket,
    Withdrawn,
)
from jigcmd.envelope.native import NativeExecutor
from jigcmd.errors import Code, JigError
from tests.envelope.hostile_harness import TracedExecutor, probe_plan

pytestmark = pytest.mark.envelope

PRINT_ARGS = 'console.log("ran " + process.argv.slice(2).join(" "));\n'
# A failsafe for reaching the gate, so a candidate that never waits there fails the test.
_FAILSAFE_S = 30.0


@pytest.fixture
async def native(envelope: TracedExecutor) -> AsyncIterator[NativeExecutor]:
    """The untraced executor (withdrawn runs never start, so there is nothing to trace)."""
    assert isinstance(envelope.inner, NativeExecutor)
    yield envelope.inner
    # This executor keeps no prepared pool: each launch builds job `jigcmd-<run id>`.
    left = [job for job in envelope.backend.list_jobs() if job in ISSUED]
    assert not left, f"a withdrawn launch left its cgroup job: {left}"


ISSUED: set[str] = set()


def ticket() -> Ticket:
    """A ticket whose envelope's cgroup job the `native` fixture checks for afterwards."""
    run_id = uuid.uuid4().hex[:16]
    ISSUED.add(f"jigcmd-{run_id}")
    return Ticket(run_id=run_id)


def _processes_with(token: str) -> list[int]:
    """Host pids whose command line has `token` as a whole argument."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                arguments = handle.read().split(b"\0")
        except OSError:
            continue
        if token.encode() in arguments:
            found.append(int(entry))
    return found


def _at_the_gate(zygote: int) -> int | None:
    """Pid 1 under `zygote` if, dropped to the candidate's privileges, it waits on its gate.

    Before `go` it waits on its channel (a socket) with every privilege of its namespace;
    after `go` it drops them and only the gate, a pipe, is left between it and the spawn, so
    a privilege-free descendant reading a pipe is staged there.
    """
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            parents[int(entry)] = int(data[data.rindex(b")") + 2 :].split()[1])
    for pid in parents:
        above = parents.get(pid)
        while above is not None and above not in (zygote, 0, 1):
            above = parents.get(above)
        if above != zygote:
            continue
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as handle:
                status = dict(line.split(":\t", 1) for line in handle if ":\t" in line)
            with open(f"/proc/{pid}/wchan", encoding="ascii") as handle:
                wchan = handle.read()
        except OSError:
            continue
        if int(status.get("CapEff", "1"), 16) == 0 and wchan.endswith("pipe_read"):
            return pid
    return None


def _until_at_the_gate(zygote: int) -> int:
    """Until the staged launch waits on its gate (fails after the failsafe); its pid 1."""
    deadline = time.monotonic() + _FAILSAFE_S
    while (init := _at_the_gate(zygote)) is None:
        assert time.monotonic() < deadline, "no staged candidate ever waited on its gate"
        time.sleep(0.005)
    return init


def _zygote_pid(native: NativeExecutor) -> int:
    zygote = native._zygote
    assert zygote is not None, "admission runs only once the zygote has the launch"
    return zygote.pid


class Recorder:
    """An `on_started` hook that remembers whether the candidate was ever exec'd."""

    def __init__(self) -> None:
        self.started: list[EnvelopeIdentity] = []

    async def __call__(self, identity: EnvelopeIdentity) -> None:
        self.started.append(identity)


async def test_the_candidate_starts_only_once_admitted(envelope: TracedExecutor) -> None:
    """While `admit` is pending nothing runs the candidate's argv; once it says yes, it runs."""
    token = f"tok-{uuid.uuid4().hex}"
    seen_while_pending: list[int] = []

    assert isinstance(envelope.inner, NativeExecutor)
    native = envelope.inner

    async def admit(assigned: Assigned | None) -> bool:
        del assigned
        # Staged and held at the gate: a candidate that did not wait would have exec'd instead.
        await anyio.to_thread.run_sync(_until_at_the_gate, _zygote_pid(native))
        seen_while_pending.extend(_processes_with(token))
        return True

    outcome = await envelope.run(probe_plan(PRINT_ARGS, args=[token]), admit=admit)
    assert seen_while_pending == []
    assert (outcome.exit_code, outcome.stdout.data) == (0, f"ran {token}\n".encode())


async def test_a_withdrawn_launch_runs_nothing_and_releases_its_envelope(
    native: NativeExecutor,
) -> None:
    """`admit` says no: `Withdrawn`, the candidate was never exec'd, the envelope is gone."""
    token, started = f"tok-{uuid.uuid4().hex}", Recorder()

    async def admit(assigned: Assigned | None) -> bool:
        del assigned
        # Withdrawn only once the candidate waits on the gate, staged as far as it goes.
        await anyio.to_thread.run_sync(_until_at_the_gate, _zygote_pid(native))
        return False

    with pytest.raises(Withdrawn):
        await native.execute(
            probe_plan(PRINT_ARGS, args=[token]), CancelSignal(), ticket(), Hooks(admit, started)
        )
    assert started.started == []
    assert _processes_with(token) == []


async def test_an_admission_error_withdraws_the_launch_and_is_raised(
    native: NativeExecutor,
) -> None:
    """`admit` raises (a conflict found in the journal): that error, and nothing ran."""
    token, started = f"tok-{uuid.uuid4().hex}", Recorder()

    async def admit(assigned: Assigned | None) -> bool:
        del assigned
        raise JigError(Code.OPERATION_CONFLICT, "reused differently")

    with pytest.raises(JigError) as raised:
        await native.execute(
            probe_plan(PRINT_ARGS, args=[token]), CancelSignal(), ticket(), Hooks(admit, started)
        )
    assert raised.value.code is Code.OPERATION_CONFLICT
    assert started.started == []


async def test_a_cancel_during_admission_is_cancelled_before_dispatch(
    native: NativeExecutor,
) -> None:
    """A cancel that arrives while `admit` runs withdraws the launch: CANCELLED, nothing ran."""
    token, started, cancel = f"tok-{uuid.uuid4().hex}", Recorder(), CancelSignal()

    async def admit(assigned: Assigned | None) -> bool:
        del assigned
        cancel.set()
        return True

    with pytest.raises(EnvelopeFailure) as raised:
        await native.execute(
            probe_plan(PRINT_ARGS, args=[token]), cancel, ticket(), Hooks(admit, started)
        )
    assert raised.value.kind is FailureKind.CANCELLED_BEFORE_DISPATCH
    error = envelope_error(raised.value)
    assert error.code is Code.CANCELLED
    assert "nothing ran" in str(error)
    assert started.started == []


async def test_a_staged_pid_1_killed_from_outside_is_lost_not_nothing_ran(
    native: NativeExecutor,
) -> None:
    """Pid 1 dies silently after its go: the candidate may have started (pid 1 reports its
    spawn only when Bun lets it run), so the run's end is unknown, never "nothing ran"."""
    token = f"tok-{uuid.uuid4().hex}"

    async def admit(assigned: Assigned | None) -> bool:
        del assigned
        init = await anyio.to_thread.run_sync(_until_at_the_gate, _zygote_pid(native))
        # Killed at its gate, so surely before its spawn: the zygote cannot tell the two apart.
        os.kill(init, signal.SIGKILL)
        return True

    with pytest.raises(EnvelopeFailure) as failed:
        await native.execute(
            probe_plan(PRINT_ARGS, args=[token]), CancelSignal(), ticket(), Hooks(admit)
        )
    assert failed.value.kind is FailureKind.INIT_LOST
    assert "may have started" in str(failed.value)
    assert envelope_error(failed.value).code is Code.UNCERTAIN
    assert _processes_with(token) == []
