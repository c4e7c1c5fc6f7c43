"""The seam between the protocol/policy core and the envelope mechanism."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import msgspec

from jigcmd.evidence import ResourceReport, StopReason
from jigcmd.journal.identity import ProcessIdentity
from jigcmd.plan import RunPlan

__all__ = [
    "Admit",
    "Assigned",
    "CapturedStream",
    "Ending",
    "EnvelopeIdentity",
    "Executor",
    "Hooks",
    "OnEnded",
    "OnStarted",
    "RunOutcome",
    "Ticket",
    "Withdrawn",
]


class CapturedStream(msgspec.Struct, frozen=True):
    """The retained prefix of one output stream (at most the cap) and whether bytes were dropped."""

    data: bytes
    truncated: bool


class RunOutcome(msgspec.Struct, frozen=True):
    """How one envelope run ended; produced only after cleanup was confirmed."""

    stdout: CapturedStream
    stderr: CapturedStream
    exit_code: int | None
    signal: str | None
    stop_reason: StopReason
    report: ResourceReport


class Ending(msgspec.Struct, frozen=True):
    """How the candidate ended and all it printed, known before its cleanup is confirmed."""

    stdout: CapturedStream
    stderr: CapturedStream
    exit_code: int | None
    signal: str | None
    stop_reason: StopReason


class Ticket(msgspec.Struct, frozen=True):
    """Who owns a run: its id, the journal row it answers to, and its reserved envelope slot.

    The supervisor holds the slot's lock (`slot_fd`) until the envelope is released, and
    closes the journal row (`root_run`, `operation_id` in the journal under `state_dir`)
    itself as uncertain if the server dies mid-run: both outlive the server.
    """

    run_id: str
    operation_id: str | None = None
    root_run: str = ""
    state_dir: str | None = None
    slot_fd: int | None = None


class EnvelopeIdentity(msgspec.Struct, frozen=True):
    """Which envelope serves a run: its supervisor, cgroup directories and network namespace."""

    supervisor_pid: int
    init_pid: int
    cgroup_paths: tuple[str, ...]
    netns: str


class Assigned(msgspec.Struct, frozen=True):
    """The prepared envelope a launch went to, known before the candidate may start.

    `run_id` is the envelope's own id (its cgroup job is `jigcmd-<run_id>`), which the run
    takes instead of the ticket's.
    """

    run_id: str
    supervisor: ProcessIdentity
    cgroup_paths: tuple[str, ...]

    def serves(self, envelope: EnvelopeIdentity) -> bool:
        """Whether the started envelope is this one (not one re-prepared under another name)."""
        return (
            envelope.supervisor_pid == self.supervisor.pid
            and envelope.cgroup_paths == self.cgroup_paths
        )


OnStarted = Callable[[EnvelopeIdentity], Coroutine[Any, Any, None]]
OnEnded = Callable[[Ending], Coroutine[Any, Any, None]]
# Decides, once the launch is staged, whether the candidate may start (see `Hooks`); told
# which prepared envelope took the launch (None: one made for it, identified at start).
Admit = Callable[[Assigned | None], Coroutine[Any, Any, bool]]


class Withdrawn(Exception):
    """The `admit` hook said no: the staged launch was withdrawn and nothing ran."""


@dataclass(frozen=True, slots=True)
class Hooks:
    """What the caller does at each point of a run, beside the run (all optional).

    `admit` is awaited exactly once, after the launch was handed to the envelope (which
    stages the candidate meanwhile) and before the candidate may start, so the caller's
    durable bookkeeping overlaps the hand-off; it is told which prepared envelope took the
    launch (`Assigned`), or None. False, or a cancel by then, withdraws the launch: nothing
    runs, and `Withdrawn` (or CANCELLED) is raised. Errors of the executor itself come after
    `admit` was awaited.
    `on_started` runs once the candidate was exec'd, concurrently with the run.
    `on_ended` runs once the candidate ended and its output is complete, concurrently with
    the envelope's cleanup (which `execute` still awaits); skipped when the output could not
    be completed first. Both have finished before `execute` returns.
    """

    admit: Admit | None = None
    on_started: OnStarted | None = None
    on_ended: OnEnded | None = None


class Executor(Protocol):
    """Executes plans in a fresh envelope. Raises `JigError` for its own failures.

    `EXECUTION_FAILED` when any piece of the envelope cannot be established (nothing ran);
    `UNCERTAIN` when the run's end or its cleanup cannot be confirmed. A candidate's exit,
    signal, deadline or cancellation is a `RunOutcome`, never an exception.
    """

    async def execute(
        self,
        plan: RunPlan,
        cancel: anyio.Event,
        ticket: Ticket | None = None,
        hooks: Hooks | None = None,
    ) -> RunOutcome:
        """Run `plan`; stop the whole tree when `cancel` is set or the plan's deadline passes.

        `hooks` says what the caller does along the way (see `Hooks`).
        """
        ...
