"""An operation run by another process, as its waiters here and there see it in the journal.

A process joining an operation that another process runs (another `serve` on this state
directory, with the same run id) waits on its journal row (`Ownership._join`), and for as
long as it waits the journal names it as a waiter (`waiting_for`); the process running the
work asks, when its own last waiter leaves, whether such a waiter is still alive
(`others_waiting`, `jigcmd.command.sharing`). Neither is on a plain call's path.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import anyio

from jigcmd.durable.rowclosing import JOURNAL_FAILURES
from jigcmd.journal.store import Journal

__all__ = ["others_waiting", "waiting_for"]

logger = logging.getLogger(__name__)


@asynccontextmanager
async def waiting_for(journal: Journal, operation_id: str, *, root_run: str) -> AsyncIterator[None]:
    """Named in the journal as a waiter of the operation until the block ends, however."""
    try:
        join_id: str | None = await anyio.to_thread.run_sync(
            partial(journal.join_waiting, operation_id, root_run=root_run)
        )
    except JOURNAL_FAILURES as exc:
        # It still waits; the process running it just cannot count it.
        logger.warning("the journal could not record a join of %s: %s", operation_id, exc)
        join_id = None
    try:
        yield
    finally:
        if join_id is not None:
            await _unjoin(journal, operation_id, root_run, join_id)


async def _unjoin(journal: Journal, operation_id: str, root_run: str, join_id: str) -> None:
    unjoin = partial(journal.unjoin, operation_id, root_run=root_run, join_id=join_id)
    try:
        # Shielded: a waiter leaving by its task's cancel must still stop counting.
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(unjoin)
    except JOURNAL_FAILURES as exc:
        # Counted no longer once this process is gone (its liveness is judged).
        logger.warning("the journal could not remove a join of %s: %s", operation_id, exc)


async def others_waiting(journal: Journal, operation_id: str, *, root_run: str) -> bool:
    """Whether a live process other than this one waits for the operation."""
    try:
        return await anyio.to_thread.run_sync(
            partial(journal.others_waiting, operation_id, root_run=root_run)
        )
    except JOURNAL_FAILURES as exc:
        # Unknown: the work stops as if none did (the rule before other processes counted).
        logger.warning("the journal could not say who waits for %s: %s", operation_id, exc)
        return False
