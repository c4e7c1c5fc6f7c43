"""The seam between the protocol/policy core and the envelope mechanism."""

from __future__ import annotations

import enum
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import msgspec

from jigcmd.cancel import CancelSignal
from jigcmd.envelope.scratchfile import ScratchRead
from jigcmd.evidence import ResourceReport, StopReason
from jigcmd.journal.identity import ProcessIdentity
from jigcmd.plan import Limits, RunPlan

__all__ = [
    "Admit",
    "Assigned",
    "CapturedStream",
    "Ending",
    "Enforced",
    "EnvelopeFailure",
    "EnvelopeIdentity",
    "Executor",
    "FailureKind",
    "Hooks",
    "OnEnded",
    "OnOutput",
    "OnStarted",
    "Refills",
    "RunOutcome",
    "ScratchRead",
    "Ticket",
    "Withdrawn",
    "enforced",
]


class CapturedStream(msgspec.Struct, frozen=True):
    """The retained prefix of one output stream (at most the cap) and whether bytes were dropped."""

    data: bytes
    truncated: bool
    # When bytes were dropped: the stream's last ones (at most 4 KiB, some perhaps also in
    # `data`), where a runner's summary is; b"" otherwise. Never in the contract's evidence.
    tail: bytes = b""
    # How many bytes the stream carried past `data` (read and dropped, or spliced away).
    dropped: int = 0


class RunOutcome(msgspec.Struct, frozen=True):
    """How one envelope run ended; produced only after cleanup was confirmed."""

    stdout: CapturedStream
    stderr: CapturedStream
    exit_code: int | None
    signal: str | None
    stop_reason: StopReason
    report: ResourceReport
    # Set when the plan named a `scratch_file`.
    scratch_file: ScratchRead | None = None


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


# Returns the work to do beside the run (awaited before `execute` returns), or None when
# there is none: a coroutine function qualifies, and a plain function spawns no task.
OnStarted = Callable[[EnvelopeIdentity], Coroutine[Any, Any, None] | None]
OnEnded = Callable[[Ending], Coroutine[Any, Any, None]]
# Told each piece of output as the server reads it while the command runs: "stdout" or
# "stderr", the bytes, and whether they follow the last piece told with nothing between.
# Past the capture's cap most is dropped unread and only each drain's last bytes are told
# (after a gap). Called from the reading task: it must be quick, bulk work on the bytes
# (never a Python step per line), and must not block.
OnOutput = Callable[[str, bytes, bool], None]
# Decides, once the launch is staged, whether the candidate may start (see `Hooks`); told
# which prepared envelope took the launch (None: one made for it, identified at start).
Admit = Callable[[Assigned | None], Coroutine[Any, Any, bool]]


class FailureKind(enum.StrEnum):
    """What went wrong in the envelope itself (a candidate's own ending is a `RunOutcome`)."""

    # Nothing ran: the zygote could not be started.
    ZYGOTE_NOT_STARTED = "zygote not started"
    # Nothing ran: the zygote started but could not set itself up (cgroups, filter, imports).
    ENVELOPE_UNAVAILABLE = "envelope unavailable"
    # Nothing ran: the zygote stopped taking launches.
    ZYGOTE_UNREACHABLE = "zygote unreachable"
    # Nothing ran: a step of building the run's envelope failed (`cleaned_up` says whether
    # what was built is proved gone).
    SETUP_FAILED = "setup failed"
    # Nothing ran: an exact path of a host plan (its cwd, a host directory, its program) was
    # no longer what the plan named when the envelope opened it (a symlink in it, or gone);
    # `step` says which (`failure.CHANGED_STEPS`), `detail` the path and how.
    PATH_CHANGED = "path changed"
    # Nothing ran: the plan's deadline passed before the candidate could start.
    DEADLINE_BEFORE_START = "deadline before start"
    # Nothing ran: the call was cancelled before the candidate was let start.
    CANCELLED_BEFORE_DISPATCH = "cancelled before dispatch"
    # The candidate may have run: the envelope's pid 1 was lost.
    INIT_LOST = "init lost"
    # The candidate may have run: the supervisor stopped reporting before the end.
    REPORTS_STOPPED = "reports stopped"
    # The candidate ran and ended, but the envelope's release is not proved.
    CLEANUP_UNPROVED = "cleanup unproved"


class EnvelopeFailure(Exception):
    """Raised when the envelope itself fails: what happened, at which step, and the detail.

    `cleaned_up` says whether everything the envelope built is proved released, and
    `cleanup_problems` what could not be. Which code and words a caller gets is chosen in
    one place, `jigcmd.command.failures`.
    """

    def __init__(
        self,
        kind: FailureKind,
        step: str,
        detail: str = "",
        *,
        cleaned_up: bool = True,
        cleanup_problems: tuple[str, ...] = (),
    ) -> None:
        super().__init__(f"{kind.value}: {step}: {detail}" if detail else f"{kind.value}: {step}")
        self.kind = kind
        self.step = step
        self.detail = detail
        self.cleaned_up = cleaned_up
        self.cleanup_problems = cleanup_problems


class Withdrawn(Exception):
    """The `admit` hook said no: the staged launch was withdrawn and nothing ran."""


@dataclass(frozen=True, slots=True)
class Hooks:
    """What the caller does at each point of a run, beside the run (all optional).

    `admit` is awaited exactly once, after the launch was handed to the envelope (which
    stages the candidate meanwhile) and before the candidate may start, so the caller's
    durable bookkeeping overlaps the hand-off; it is told which prepared envelope took the
    launch (`Assigned`), or None. False, or a cancel by then, withdraws the launch: nothing
    runs, and `Withdrawn` (or a `CANCELLED_BEFORE_DISPATCH` failure) is raised. Errors of
    the executor itself come after `admit` was awaited.
    `on_started` is called once the candidate was exec'd; the work it returns, if any, runs
    concurrently with the run.
    `on_ended` runs once the candidate ended and its output is complete, concurrently with
    the envelope's cleanup (which `execute` still awaits); skipped when the output could not
    be completed first. Both have finished before `execute` returns.
    `on_output` sees the output as it is read (see `OnOutput`), never after `execute` returned.
    """

    admit: Admit | None = None
    on_started: OnStarted | None = None
    on_ended: OnEnded | None = None
    on_output: OnOutput | None = None


class Executor(Protocol):
    """Executes plans in a fresh envelope. Raises `EnvelopeFailure` for its own failures.

    Its kind says whether nothing ran (a piece of the envelope could not be established,
    the deadline or a cancel came first) or the run's end or its cleanup is unproved. A
    candidate's exit, signal, deadline or cancellation is a `RunOutcome`, never an exception.
    """

    async def execute(
        self,
        plan: RunPlan,
        cancel: CancelSignal,
        ticket: Ticket | None = None,
        hooks: Hooks | None = None,
    ) -> RunOutcome:
        """Run `plan`; stop the whole tree when `cancel` is set or the plan's deadline passes.

        `hooks` says what the caller does along the way (see `Hooks`).
        """
        ...


@runtime_checkable
class Refills(Protocol):
    """An executor that keeps envelopes prepared and refills them once a call is answered."""

    def answered(self) -> None:
        """A call's answer was written: refill now (a hint, never needed for correctness)."""
        ...


class Enforced(msgspec.Struct, frozen=True):
    """The envelope as enforced for one plan: what a signed statement of the run names."""

    profile: str
    namespaces: tuple[str, ...]
    limits: Limits
    seccomp_filter_sha256: str
    cpus: tuple[int, ...]
    rootless: bool


def enforced(plan: RunPlan) -> Enforced:
    """What the envelope enforces when it runs `plan`: the plan's limits and pin, and its own."""
    # Imported here: the seam stays light for the pure core's type checks (no ctypes).
    from jigcmd.envelope import enforcement  # noqa: PLC0415 - see the comment above

    return Enforced(
        profile=plan.profile,
        namespaces=enforcement.NAMESPACES,
        limits=plan.limits,
        seccomp_filter_sha256=enforcement.seccomp_filter_sha256(),
        cpus=plan.cpus,
        rootless=enforcement.rootless(),
    )
