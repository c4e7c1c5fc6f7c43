"""One admitted call's run on its slot: planned, signed, executed, its row closed with its notes."""

from __future__ import annotations

import dataclasses
import math
from functools import cache, partial

import msgspec

from jigcmd.attest.attester import Attester
from jigcmd.cancel import CancelSignal
from jigcmd.command.durability import Durability, Execute
from jigcmd.command.execution import execute
from jigcmd.command.outcomes import EvidenceOf, signer
from jigcmd.command.runtime import BUN_TARGET, BunBinary
from jigcmd.envelope.api import Executor, Hooks, Ticket
from jigcmd.errors import JigError
from jigcmd.plan import Limits, RunPlan, plan_digest
from jigcmd.policy.planner import candidate_plan, unix_deadline_ms
from jigcmd.policy.request import ValidRequest
from jigcmd.protocol.commands import RunResult
from jigcmd.server.backend import Owned, Progress

__all__ = ["Call", "call_plan", "dispatch", "template_plan"]


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    """What one call brings beside its validated input: who it is, whose, and until when."""

    attester: Attester | None
    operation_id: str
    deadline_unix_ms: int | None
    signature: str | None
    context: str
    root_run: str | None
    wait_for_slot: bool
    owned: Owned | None
    trace_context: dict[str, str] | None
    begun: float
    # When the run's deadline started (Unix ms): its statement's `startedOn`.
    started_unix_ms: int
    # What Bun under jigcmd will not do with the files sent (`call_notes`), for the journal.
    notes: tuple[str, ...]


def template_plan(runtime: BunBinary, limits: Limits) -> RunPlan:
    """A plan shaped like every plan `call_plan` makes, for preparing envelopes early."""
    return candidate_plan(
        bun=BUN_TARGET,
        runtime_binds=runtime.binds,
        kind="test",
        paths=("x",),
        args=(),
        files=(),
        stdin="",
        deadline=0.0,
        limits=limits,
        label="template",
    )


def call_plan(
    valid: ValidRequest,
    operation_id: str,
    deadline: float,
    cpus: tuple[int, ...],
    *,
    runtime: BunBinary,
    limits: Limits,
) -> RunPlan:
    """The run's plan; a test command's has Bun write its JUnit report, whatever the front:
    the signed test result names each test from it (`jigcmd.attest.testnames`), which the
    console's lines cannot do exactly (a name's line breaks, a describe's " > ")."""
    return candidate_plan(
        bun=BUN_TARGET,
        runtime_binds=runtime.binds,
        kind=valid.command.kind,
        paths=valid.command.paths,
        args=valid.args,
        files=valid.files,
        stdin=valid.stdin,
        deadline=deadline,
        limits=limits,
        label=operation_id,
        cpus=cpus,
        junit=True,
    )


async def dispatch(
    executor: Executor,
    valid: ValidRequest,
    plan: RunPlan,
    call: Call,
    durability: Durability,
    *,
    root_deadline_unix_ms: int | None,
    cancel: CancelSignal,
    progress: Progress | None,
) -> RunResult:
    """Execute the planned run on its slot, signed, and close its row (`Durability.run`)."""
    # The plan's identity, for the journal's row and the signed statement alike:
    # worked out once, when the row is begun, after the launch is sent.
    digest = cache(partial(plan_digest, plan))
    evidence = EvidenceOf(valid)
    sign = signer(
        valid,
        plan,
        durability,
        call.operation_id,
        call.root_run,
        attester=call.attester,
        digest=digest,
        evidence=evidence,
        started_unix_ms=call.started_unix_ms,
    )
    run = partial(
        execute,
        executor,
        valid=valid,
        plan=plan,
        cancel=cancel,
        progress=progress,
        evidence=evidence,
        sign=sign,
        begun=call.begun,
    )
    return await durability.run(
        plan,
        partial(_noted, call.notes, run),
        digest=digest,
        evidence=evidence,
        cancel=cancel,
        sign=None if sign is None else (lambda ending: sign(ending, None, None)),
        # The row's deadline from the instant the statement names (`startedOn`): read
        # back from the monotonic deadline at the row's begin, it came 1 ms short.
        deadline_unix_ms=math.floor(
            unix_deadline_ms(call.started_unix_ms, call.deadline_unix_ms, root_deadline_unix_ms)
        ),
    )


async def _noted(
    notes: tuple[str, ...], run: Execute, ticket: Ticket, hooks: Hooks | None
) -> RunResult:
    """`run`'s result or error with the call's notes, so that the journal keeps them with its
    end: a task read back by another server shows what its first answer showed."""
    try:
        result = await run(ticket, hooks)
    except JigError as error:
        error.notes = notes
        raise
    return msgspec.structs.replace(result, notes=notes) if notes else result
