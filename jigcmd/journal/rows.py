"""The ownership journal's records: one `Row` per Project Command operation, and `Begin`."""

from __future__ import annotations

import sqlite3
from typing import Literal

import msgspec

from jigcmd.journal.identity import ProcessIdentity

__all__ = [
    "OPEN_STATES",
    "PRUNED_REASON",
    "Begin",
    "Cleanup",
    "NewRow",
    "Outcome",
    "Row",
    "State",
    "Verdict",
    "row_from",
]

# The column holds the JSON array `Journal` wrote.
_decode_paths = msgspec.json.Decoder(tuple[str, ...]).decode

State = Literal["dispatching", "running", "done", "uncertain"]
Outcome = Literal["evidence", "failure"]
Cleanup = Literal["complete", "failed"]
# What a repeated operation id means for the caller (see `Begin.verdict`).
Verdict = Literal["conflict", "uncertain", "replay", "join"]

OPEN_STATES = ("dispatching", "running")
# How the reason of a closed row whose evidence `jigcmd prune` removed begins: the row stays,
# as the tombstone that keeps its operation id from ever running again
# (`jigcmd.durable.retention`).
PRUNED_REASON = "pruned on "


class Row(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One Project Command operation as the journal knows it."""

    # The caller's run: operation identity (replay, join, conflict) holds within one run.
    root_run: str
    operation_id: str
    signature: str
    context: str
    created_unix_ms: int
    updated_unix_ms: int
    finished_unix_ms: int | None
    deadline_unix_ms: int
    run_id: str
    # The server process that wrote the row (recovery leaves a live owner's rows alone).
    owner: ProcessIdentity
    state: State
    plan_digest: str | None
    cgroup_paths: tuple[str, ...]
    netns: str | None
    supervisor: ProcessIdentity | None
    outcome: Outcome | None
    result: bytes | None
    report: bytes | None
    cleanup: Cleanup | None
    problems: str
    reason: str
    # The run's signed statement (an in-toto bundle), kept with its evidence; never on an
    # uncertain row.
    attestation: bytes | None = None
    # The caller's W3C trace context as JSON, when the call carried one.
    trace: str | None = None
    # A test command's report as its answer carried it (`jigcmd.durable.replay`), when the
    # call asked for one; None on older rows.
    tests: bytes | None = None

    @property
    def is_open(self) -> bool:
        """Whether the operation is still dispatching or running."""
        return self.state in OPEN_STATES

    @property
    def pruned(self) -> bool:
        """Whether `jigcmd prune` removed this closed operation's evidence (a tombstone)."""
        return (
            not self.is_open and self.outcome == "failure" and self.reason.startswith(PRUNED_REASON)
        )

    @property
    def cgroup_job(self) -> str:
        """The name of the run's cgroup job."""
        return f"jigcmd-{self.run_id}"


class NewRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What `Journal.begin` writes for a new operation id.

    With `supervisor` (and its `cgroup_paths`) the envelope serving it is known already: the
    row is `running` from its first commit; otherwise `dispatching`.
    """

    root_run: str
    operation_id: str
    signature: str
    context: str
    deadline_unix_ms: int
    run_id: str
    supervisor: ProcessIdentity | None = None
    cgroup_paths: tuple[str, ...] = ()
    # The digest of the plan the operation runs (`jigcmd.plan.plan_digest`), when known.
    plan_digest: str | None = None
    # The caller's W3C trace context as JSON (`{"traceparent": …, "tracestate": …}`).
    trace: str | None = None


class Begin(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What `Journal.begin` found: the row stored under the operation id, and whether it is new."""

    row: Row
    created: bool

    @property
    def existing(self) -> Row | None:
        """The row that already held this operation id, or None when `begin` inserted one."""
        return None if self.created else self.row

    def verdict(self, signature: str) -> Verdict | None:
        """None for a new row; else conflict, uncertain, replay (closed, done) or join (open)."""
        if self.created:
            return None
        if self.row.signature != signature:
            return "conflict"
        if self.row.state == "uncertain":
            return "uncertain"
        if self.row.state == "done":
            return "replay"
        return "join"


def row_from(found: sqlite3.Row) -> Row:
    """A `Row` from its database row."""
    supervisor = None
    if found["supervisor_pid"] is not None:
        supervisor = ProcessIdentity(
            pid=found["supervisor_pid"],
            start=found["supervisor_start"],
            boot_id=found["boot_id"],
            pidns=found["supervisor_pidns"],
        )
    return Row(
        root_run=found["root_run"],
        operation_id=found["operation_id"],
        signature=found["signature"],
        context=found["context"],
        created_unix_ms=found["created_unix_ms"],
        updated_unix_ms=found["updated_unix_ms"],
        finished_unix_ms=found["finished_unix_ms"],
        deadline_unix_ms=found["deadline_unix_ms"],
        run_id=found["run_id"],
        owner=ProcessIdentity(
            pid=found["owner_pid"],
            start=found["owner_start"],
            boot_id=found["boot_id"],
            pidns=found["owner_pidns"],
        ),
        state=found["state"],
        plan_digest=found["plan_digest"],
        cgroup_paths=_decode_paths(found["cgroup_paths"]),
        netns=found["netns"],
        supervisor=supervisor,
        outcome=found["outcome"],
        result=found["result"],
        report=found["report"],
        cleanup=found["cleanup"],
        problems=found["problems"],
        reason=found["reason"],
        attestation=found["attestation"],
        trace=found["trace"],
        tests=found["tests"],
    )
