"""An operation run by another process, as its waiters here and there see it in the journal.

A process joining an operation that another process runs (another `serve` on this state
directory, with the same run id) waits on its journal row (`join_running`), and for as
long as it waits the journal names it as a waiter (`waiting_for`); the process running the
work asks, when its own last waiter leaves, whether such a waiter is still alive
(`others_waiting`, `jigcmd.command.sharing`). Neither is on a plain call's path.

A joiner watches the row's owner as `jigcmd runs` does: once that process is provably gone,
nothing runs the operation, so the joiner fences and closes the row as recovery does (its very
code, `recovery.recover_unless_running`) and answers what that records (UNCERTAIN, unless the
evidence was recorded and its cleanup is proved now). A row a pass closed but has not fenced
yet (`recovery.pending`) is waited on as an open one: its run may still live.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import NamedTuple

import anyio

from jigcmd.cancel import CancelSignal
from jigcmd.durable import recoverylock
from jigcmd.durable.recovery import RecoveryReport, owner_gone, pending, recover_unless_running
from jigcmd.durable.rowclosing import JOURNAL_FAILURES, LeftOpen
from jigcmd.envelope.cgroups import CgroupBackend
from jigcmd.errors import Code, JigError
from jigcmd.journal import liveness
from jigcmd.journal.rows import Row
from jigcmd.journal.store import Journal

__all__ = [
    "Joined",
    "Joiner",
    "finish_passes",
    "join_running",
    "others_waiting",
    "waiting_for",
]

logger = logging.getLogger(__name__)

# How often a caller joining an operation run by another process looks at the journal.
_JOIN_POLL_S = 0.05
# Two conversions of one caller deadline (Unix ms to monotonic and back, in two processes)
# differ by a millisecond or so: within this they are the same deadline.
_SAME_DEADLINE_MS = 5
# How long a joiner whose deadline is the work's own waits past it for the recorded outcome:
# the work is killed at that deadline, and its row closes once the cleanup is proved.
_STOPPING_S = 10.0
# How long an envelope supervisor still alive is left to close the row of its dead server
# itself ("the server went away during the run"), before recovery fences it (and kills it).
_SUPERVISOR_FIRST_S = 1.0


# Told that a caller joined an operation whose row was created then: `server.backend.Owned`.
Joined = Callable[[int], Awaitable[None]]


class Joiner(NamedTuple):
    """A caller joining an operation that runs elsewhere: what it waits for, and how long."""

    operation_id: str
    root_run: str
    deadline: float
    cancel: CancelSignal | None
    # The same deadline in Unix ms, as the row keeps the work's (None: no deadline).
    deadline_unix_ms: int | None = None
    # Told once it joins the row: the operation runs (elsewhere).
    joined: Joined | None = None
    # What fences a dead owner's run (None: no cgroups here, so it cannot be fenced).
    backend: CgroupBackend | None = None


async def join_running(
    journal: Journal,
    joiner: Joiner,
    left_open: LeftOpen,
    close_left_open: Callable[[], Awaitable[None]],
) -> Row:
    """Wait for an operation running elsewhere to close, within this caller's deadline.

    The joiner's deadline or cancel ends only its waiting (the operation goes on where it
    runs while a caller waits for it there): that answer is not the operation's outcome,
    and is not `recorded` (not kept). A joiner whose deadline is not earlier than the
    work's waits for its outcome (for `_STOPPING_S` more at most). A row this process left
    open (`left_open`), its outcome unwritten, runs nowhere: its UNCERTAIN again; so does
    a row whose owner is gone, once fenced (see the module doc). While it waits the journal
    names this process as a waiter of the operation, for the process running it to count.
    """
    row = await _read(journal, joiner)
    if not row.is_open and not pending(row):
        return row
    if joiner.joined is not None:
        # Before the journal names this waiter: whoever sees that sees this told too.
        await joiner.joined(row.created_unix_ms)
    async with waiting_for(journal, joiner.operation_id, root_run=joiner.root_run):
        return await _wait_closed(journal, joiner, left_open, close_left_open)


async def _wait_closed(
    journal: Journal,
    joiner: Joiner,
    left_open: LeftOpen,
    close_left_open: Callable[[], Awaitable[None]],
) -> Row:
    """`join_running`'s wait: the closed row, or the joiner's own end (see there)."""
    row = await _read(journal, joiner)
    cancel, deadline, stopping = joiner.cancel, joiner.deadline, False
    owner = _OwnerWatch(journal, joiner)
    # A row recovery closed but has not fenced yet is not final: its run may still be alive.
    while row.is_open or pending(row):
        left = left_open.answered((joiner.root_run, joiner.operation_id))
        if left is not None and row.is_open:
            await close_left_open()
            raise JigError(Code.UNCERTAIN, left, recorded=True)
        if await owner.fenced(row):
            return await _fenced(journal, joiner)
        fencing = pending(row) or owner.fencing
        if cancel is not None and cancel.is_set() and not cancel.deadline_passed():
            raise await _left(journal, joiner, row, cancelled=True, fencing=fencing)
        remaining = deadline - time.monotonic()
        # A stop for the last waiting caller's deadline ends the wait as its own would.
        if remaining <= 0 or (cancel is not None and cancel.deadline_passed()):
            if remaining <= 0 and not stopping and _not_earlier(joiner, row):
                # The work is stopped at this very deadline: its outcome is this one's too.
                deadline, stopping = time.monotonic() + _STOPPING_S, True
                continue
            raise await _left(
                journal, joiner, row, cancelled=False, stopping=stopping, fencing=fencing
            )
        with anyio.move_on_after(min(_JOIN_POLL_S, remaining)):
            await (anyio.sleep_forever() if cancel is None else cancel.wait())
        row = await _read(journal, joiner)
    return row


async def _read(journal: Journal, joiner: Joiner) -> Row:
    get = partial(journal.get, joiner.operation_id, root_run=joiner.root_run)
    row = await anyio.to_thread.run_sync(get)
    if row is None:
        raise JigError(Code.UNCERTAIN, f"operation {joiner.operation_id!r} vanished")
    return row


async def _fenced(journal: Journal, joiner: Joiner) -> Row:
    """The row recovery closed; one it could not close is UNCERTAIN all the same."""
    row = await _read(journal, joiner)
    if row.is_open or pending(row):
        raise JigError(
            Code.UNCERTAIN,
            f"the server running operation {joiner.operation_id!r} is gone, and recovery "
            "could not close its row; `jigcmd recover` closes it",
        )
    return row


def _not_earlier(joiner: Joiner, row: Row) -> bool:
    """Whether the joiner's deadline is not earlier than the work's (the row's)."""
    mine = joiner.deadline_unix_ms
    return mine is not None and mine + _SAME_DEADLINE_MS >= row.deadline_unix_ms


async def _left(
    journal: Journal,
    joiner: Joiner,
    row: Row,
    *,
    cancelled: bool,
    stopping: bool = False,
    fencing: bool = False,
) -> JigError:
    """This joiner's own end (not the operation's), in words true of what it knows happens
    there (the open `row` as it last read it)."""
    op = joiner.operation_id
    code = Code.CANCELLED if cancelled else Code.DEADLINE_EXCEEDED
    if fencing:
        # Its server is gone and a recovery pass is fencing its run (it goes on regardless).
        ended = "cancelled" if cancelled else "the deadline passed"
        return JigError(
            code,
            f"{ended} while the run of operation {op!r}, whose server is gone, was being "
            "fenced by recovery; send it again for its recorded outcome",
        )
    over = _run_over(row)
    if over is not None:
        ended = "cancelled while waiting" if cancelled else "the deadline passed"
        return JigError(code, f"{ended}; {over}; send it again for its recorded outcome")
    if stopping:
        return JigError(
            code,
            f"the deadline passed, and operation {op!r}, run elsewhere to that same deadline, "
            f"was not closed {_STOPPING_S:g} s later (its server may not have recorded its "
            "outcome yet); send it again for its recorded outcome",
        )
    if not row.cgroup_paths:
        return await _left_unseen(journal, joiner, cancelled=cancelled)
    ended = (
        f"cancelled while waiting for operation {op!r}, which is still running elsewhere"
        if cancelled
        else f"the deadline passed while operation {op!r} was still running elsewhere"
    )
    if await others_waiting(journal, op, root_run=joiner.root_run):
        return JigError(
            code, f"{ended}; it goes on there for its other callers (send it again to join it)"
        )
    # No other process waits: the process running it keeps it only for a caller of its own,
    # which this one cannot see; without one it stops the work, CANCELLED recorded.
    return JigError(
        code,
        f"{ended}; no caller waits for it in another process, so it is being stopped "
        "(CANCELLED recorded) unless a caller in the process running it still waits for it",
    )


def _run_over(row: Row) -> str | None:
    """What the open `row` proves of a run that is over (its server yet to close the row);
    None when its run may still be running (its envelope there, or none recorded)."""
    op = row.operation_id
    if row.result is not None:
        # Written only once the command ended; its close waits on the cleanup or the disk.
        return (
            f"operation {op!r} ended elsewhere and its evidence is recorded, but its server "
            "has not closed its row yet"
        )
    # Its envelope's cgroup, made before the run and removed once its tree is gone (the
    # supervisor, the server's zygote, outlives it): nothing of the run is left without it.
    if not row.cgroup_paths or any(os.path.exists(path) for path in row.cgroup_paths):
        return None
    return (
        f"operation {op!r} ran elsewhere and its envelope is gone, but its server has not "
        "recorded its outcome yet"
    )


async def _left_unseen(journal: Journal, joiner: Joiner, *, cancelled: bool) -> JigError:
    """`_left` for a row naming no envelope: whether it runs, or ran, is not known here."""
    op = joiner.operation_id
    ended = "cancelled while waiting" if cancelled else "the deadline passed"
    ended += f" for operation {op!r}, open elsewhere with no envelope recorded for it"
    if await others_waiting(journal, op, root_run=joiner.root_run):
        then = "whatever runs of it goes on there for its other callers (send it again to join it)"
    else:
        then = (
            "no caller waits for it in another process, so whatever runs of it is stopped "
            "unless a caller in that process still waits for it"
        )
    code = Code.CANCELLED if cancelled else Code.DEADLINE_EXCEEDED
    return JigError(code, f"{ended}; {then}")


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


class _OwnerWatch:
    """The joined row's owner, watched as `jigcmd runs` does: once gone, its run is fenced.

    The fence is a recovery pass in a thread of its own, which this joiner does not wait
    for: its deadline or cancel still ends its wait at once (the pass goes on). No pass is
    started while another live one runs (`recoverylock`); a row a pass closed is watched
    until that pass has fenced its run, and fenced again here if that pass died.
    """

    def __init__(self, journal: Journal, joiner: Joiner) -> None:
        self._journal = journal
        self._joiner = joiner
        self._state_dir = journal.path.parent
        # When the owner was first seen gone (monotonic).
        self._gone_since: float | None = None
        self._pass: _Pass | None = None

    @property
    def fencing(self) -> bool:
        """Whether this joiner's own recovery pass is running."""
        return self._pass is not None and self._pass.is_alive()

    async def fenced(self, row: Row) -> bool:
        """Whether this joiner's own recovery pass has ended, recovery's word on `row` final.

        Raises UNCERTAIN when the run cannot be fenced here (no cgroups, the journal failed).
        """
        if self._pass is not None:
            if self._pass.is_alive():
                return False
            done, self._pass = self._pass, None
            if done.report is not None or done.error is not None:
                return self._ended(done)
            # Another pass had the lock: it fences this run; watch it as any other.
        if not self._needs_pass(row):
            return False
        op = self._joiner.operation_id
        backend = self._joiner.backend
        if backend is None:
            raise JigError(
                Code.UNCERTAIN,
                f"the server running operation {op!r} is gone, its outcome unproved; without "
                "cgroups this server cannot fence its run: `jigcmd recover` closes it UNCERTAIN",
            )
        try:
            elsewhere = await anyio.to_thread.run_sync(recoverylock.running, self._state_dir)
        except recoverylock.LockUnusable as exc:
            raise JigError(
                Code.UNCERTAIN,
                f"the server running operation {op!r} is gone, its outcome unproved; this "
                f"server cannot fence its run: {exc}",
            ) from exc
        if elsewhere:
            return False  # a live pass is at it: its row is final once that pass ends
        self._pass = _Pass(self._journal, backend)
        self._pass.start()
        return False

    def _needs_pass(self, row: Row) -> bool:
        """Whether `row` needs a pass: its owner gone (its supervisor given a moment), or
        closed by a pass not yet done (it may have died)."""
        if pending(row):
            return True
        if not owner_gone(self._state_dir, row):
            return False
        now = time.monotonic()
        self._gone_since = self._gone_since or now
        supervisor = row.supervisor
        # Within that moment it fences its run and closes the row itself, in its own words.
        return (
            supervisor is None
            or now - self._gone_since >= _SUPERVISOR_FIRST_S
            or not liveness.alive(self._state_dir, supervisor, tidy=False)
        )

    def _ended(self, done: _Pass) -> bool:
        if done.error is not None:
            gone = f"the server running operation {self._joiner.operation_id!r} is gone"
            raise JigError(
                Code.UNCERTAIN,
                f"{gone}, its outcome unproved; the journal could not record its fence: "
                f"{done.error}",
            )
        return True


class _Pass(threading.Thread):
    """One recovery pass for a joiner, unless another is running (then `report` stays None)."""

    def __init__(self, journal: Journal, backend: CgroupBackend) -> None:
        # Not a daemon: an exiting server lets a started pass finish (`finish_passes`).
        super().__init__(name="jigcmd recovery for a joiner")
        self._journal = journal
        self._backend = backend
        self.report: RecoveryReport | None = None
        self.error: Exception | None = None

    def start(self) -> None:
        with _passes_guard:
            _passes.add(self)
        super().start()

    def run(self) -> None:
        try:
            self.report = recover_unless_running(self._journal, self._backend)
        except JOURNAL_FAILURES as exc:
            self.error = exc
        except Exception as exc:
            logger.exception("a joiner's recovery pass failed")
            self.error = exc
        finally:
            with _passes_guard:
                _passes.discard(self)
        if self.report is not None and not self.report.clean:
            logger.warning("recovery could not confirm every cleanup: %s", self.report)


_passes: set[_Pass] = set()
_passes_guard = threading.Lock()


def finish_passes() -> None:
    """Wait for the joiners' recovery passes still running (before the journal closes)."""
    with _passes_guard:
        running = list(_passes)
    for each in running:
        each.join()
