"""Which run a Project Command statement is of, held against what the caller knows of it.

A FLOW Run/1 answer is the ten evidence fields and nothing else: no run id, no operation id,
no lock. The same call under another run, another lock or another front (an MCP session,
`jigcmd run`) answers the same evidence, so its statement would match every evidence check.
What the caller knows of its own call is checked when given (`--run-id`, `--operation-id`,
`--lock`); what it did not give is a `skip` line naming each fact, never passed over. A
statement no Run/1 call can have made (a `jigcmd run`'s) fails against a Run/1 answer. Where
its test names were read (Bun's JUnit report, or its console) tells no front apart: every
front's test command has Bun write the report, and any front's statement signed before the
release was proved, or of a run that ended before Bun wrote it, reads the console.
"""

from __future__ import annotations

from dataclasses import dataclass

from jigcmd.attest.attester import HostIdentity
from jigcmd.attest.checks import Check, skip
from jigcmd.attest.statement import RunStatement
from jigcmd.policy.lock import Lock

__all__ = ["Expected", "run_checks"]

# A `jigcmd run`'s operation id: outside the Run/1 grammar, so never a caller's operation.
RUN_VERB_OPERATION = "(jigcmd run)"


@dataclass(frozen=True)
class Expected:
    """What the caller knows of its own call: its run id, the operation id, the lock."""

    run_id: str | None = None
    operation_id: str | None = None
    # The lock file as read (its digest is the statement's `lockDigest`), decoded, and named.
    lock: tuple[bytes, Lock, str] | None = None

    def given(self) -> bool:
        """Whether any of them was given."""
        return self.run_id is not None or self.operation_id is not None or self.lock is not None


def run_checks(
    statement: RunStatement,
    expected: Expected,
    shape: str | None,
    *,
    run1: bool = False,
) -> list[Check]:
    """The `run` and `admission` checks: made with what was given, else said unchecked when
    the evidence names no run (`shape`, what it is; `run1`, a Run/1 answer)."""
    checks = []
    foreign = _not_run1(statement) if run1 else None
    if foreign is not None:
        checks.append(Check("run", False, f"a Run/1 answer, but {foreign}: no Run/1 call made it"))
    # Refused already: a `skip run` line beside the failure would only repeat it.
    identity = _run(statement, expected, None if foreign else shape)
    admission = _admission(statement, expected, shape)
    return checks + [c for c in (identity, admission) if c is not None]


def _not_run1(statement: RunStatement) -> str | None:
    """Why the statement cannot be of a Run/1 call, if its signed facts say so."""
    run = statement.predicate.run
    if run.operation_id == RUN_VERB_OPERATION or run.caller_run is None:
        return (
            f'the statement is a `jigcmd run`\'s (operationId "{run.operation_id}", no caller '
            "run), which answers no Run/1 line"
        )
    return None


def _run(statement: RunStatement, expected: Expected, shape: str | None) -> Check | None:
    run = statement.predicate.run
    caller = "no caller run" if run.caller_run is None else f'caller run "{run.caller_run}"'
    named = f'operation "{run.operation_id}" of {caller}'
    envelope = f"runId {run.run_id}, the envelope's, is no caller's to know: `jigcmd runs` lists it"
    differs = [
        f'--{option} "{given}"'
        for option, given, signed in (
            ("run-id", expected.run_id, run.caller_run),
            ("operation-id", expected.operation_id, run.operation_id),
        )
        if given is not None and given != signed
    ]
    if differs:
        return Check("run", False, f"the statement is of {named}, not {' and '.join(differs)}")
    if expected.run_id is not None and expected.operation_id is not None:
        return Check("run", True, f"{named}, as --run-id and --operation-id say ({envelope})")
    if shape is None and expected.run_id is None and expected.operation_id is None:
        return None
    unchecked = [
        f"{option} (--{flag})"
        for option, flag, given in (
            ("callerRun", "run-id", expected.run_id),
            ("operationId", "operation-id", expected.operation_id),
        )
        if given is None
    ]
    alone = "--run-id" if expected.run_id is not None else "--operation-id"
    said = f"{shape} names no run" if shape is not None else f"only {alone} was given"
    return skip(
        "run",
        f"{said}, so the statement's {named} is unchecked: {', '.join(unchecked)}; {envelope}",
    )


def _admission(statement: RunStatement, expected: Expected, shape: str | None) -> Check | None:
    admission = statement.predicate.admission
    runtime = statement.predicate.runtime
    if expected.lock is None:
        if shape is None:
            return None
        return skip(
            "admission",
            f"{shape} names no lock, so the statement's lockDigest {admission.lock_digest} and "
            f"bindingDigest {admission.binding_digest} are unchecked (--lock, the lock the "
            "caller's serve admitted)",
        )
    data, lock, name = expected.lock
    admitted = HostIdentity.from_lock(lock, data)
    differs = [
        field
        for field, ok in (
            ("lockDigest", admitted.admission.lock_digest == admission.lock_digest),
            ("bindingDigest", admitted.admission.binding_digest == admission.binding_digest),
            ("descriptor", admitted.admission.descriptor == admission.descriptor),
            ("runtime", admitted.runtime == runtime),
        )
        if not ok
    ]
    if differs:
        return Check(
            "admission",
            False,
            f"the statement differs from --lock {name} in {', '.join(differs)}: its "
            f"lockDigest is {admission.lock_digest}, the file's {admitted.admission.lock_digest}",
        )
    return Check(
        "admission",
        True,
        f"lockDigest {admission.lock_digest} is --lock {name}'s, and its Binding, contract "
        "and Bun are the statement's",
    )
