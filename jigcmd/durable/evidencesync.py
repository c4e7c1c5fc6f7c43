"""A run's evidence made durable in two halves: committed on the loop, its sync in flight.

The commit is made on the request's path (`pathwrite`), without waiting for the disk; the
sync is left running while the run's end goes on, and the answer waits for it (`synced`).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import NamedTuple

import anyio

from jigcmd.durable.pathwrite import write_soon
from jigcmd.durable.rowclosing import JOURNAL_FAILURES
from jigcmd.journal.aiosync import PendingSync
from jigcmd.journal.store import Journal

__all__ = ["RecordedEvidence", "commit_evidence", "synced"]

logger = logging.getLogger(__name__)


class RecordedEvidence(NamedTuple):
    """A run's evidence as `commit_evidence` committed it, and its sync if still in flight."""

    data: bytes
    pending: PendingSync | None


async def commit_evidence(
    journal: Journal,
    operation_id: str,
    data: bytes,
    *,
    root_run: str,
    attestation: bytes | None,
) -> RecordedEvidence | None:
    """Commit `data` on the operation's open row; None when the row was closed or it failed."""
    record = partial(
        journal.record_result,
        operation_id,
        root_run=root_run,
        outcome="evidence",
        result=data,
        attestation=attestation,
    )

    def at_once() -> tuple[bool, PendingSync | None] | None:
        written = record(wait=False, durable=False)
        if written is None:
            return None
        return written, journal.sync_soon() if written else None

    try:
        # The answer waits for this commit (see `pathwrite`) and its sync (`Ownership.finish`).
        written, pending = await write_soon(at_once, lambda: (record(), None))
    except JOURNAL_FAILURES as exc:
        # Not durable yet: `finish` tries again and says UNCERTAIN if it cannot either.
        logger.warning("the journal could not record the evidence of %s: %s", operation_id, exc)
        return None
    return RecordedEvidence(data, pending) if written else None


async def synced(journal: Journal, recorded: RecordedEvidence) -> bool:
    """Wait for the evidence's sync; False when it failed (the journal then refuses writes)."""
    pending = recorded.pending
    if pending is None:
        return True
    try:
        # Not cancelled, as a write is not: the answer says whether the evidence is durable.
        with anyio.CancelScope(shield=True):
            while not journal.synced(pending):
                await anyio.wait_readable(pending)
    except OSError as exc:
        logger.warning("the journal could not sync the evidence: %s", exc)
        return False
    finally:
        pending.close()
    return True
