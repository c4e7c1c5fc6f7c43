"""Journal rows for the journal's tests: a new row, a row begun, a row closed as a server does."""

from __future__ import annotations

from jigcmd.journal.identity import ProcessIdentity
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal

__all__ = ["RUN", "begin_row", "close_unsynced", "new_row"]

# The caller's run of these tests' operations.
RUN = "run-a"


def new_row(
    operation_id: str = "op-1",
    *,
    signature: str = "sig-a",
    context: str = "c",
    deadline_unix_ms: int = 0,
    run_id: str = "r9",
    supervisor: ProcessIdentity | None = None,
    cgroup_paths: tuple[str, ...] = (),
) -> NewRow:
    """A new journal row, with the envelope serving it when that is known."""
    return NewRow(
        root_run=RUN,
        operation_id=operation_id,
        signature=signature,
        context=context,
        deadline_unix_ms=deadline_unix_ms,
        run_id=run_id,
        supervisor=supervisor,
        cgroup_paths=cgroup_paths,
    )


def close_unsynced(journal: Journal, operation_id: str, *, wait: bool = True) -> bool | None:
    """Close an open row done with its evidence, as a server does once the cleanup is proved."""
    return journal.finish(
        operation_id,
        root_run=RUN,
        outcome="evidence",
        result=b"ev",
        report=None,
        cleanup_complete=True,
        durable=False,
        wait=wait,
    )


def begin_row(journal: Journal, operation_id: str = "op-1", signature: str = "sig-a") -> bool:
    """Begin an operation of session-1; whether this call created its row."""
    return journal.begin(
        new_row(
            operation_id,
            signature=signature,
            context="session-1",
            deadline_unix_ms=1_900_000_000_000,
            run_id=f"run-{operation_id}",
        )
    ).created
