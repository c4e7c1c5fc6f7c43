"""Waiters of other processes in the journal: who waits for an operation running elsewhere.

A base of `store.Journal`. A process that joins an operation another process runs (another
`serve` on this state directory, with the same run id) records one row per join, named by
its own identity, for as long as it waits, and removes it when its waiting ends (an answer,
a cancel, a deadline). The process running the operation counts these rows when its own
last waiter leaves: the work goes on while one of them is alive. A row whose process died
(SIGKILL, a crash: it could remove nothing) counts for nothing, as the owner of a row does
not once its liveness lock is free (`jigcmd.journal.liveness`), and is removed when found.

Written without a sync of their own: a row is about a live process, and after a power cut
none of them is (the boot differs); only other processes' reading them matters.
"""

from __future__ import annotations

import os
import uuid

from jigcmd.clock import unix_ms
from jigcmd.journal import liveness
from jigcmd.journal.database import Database
from jigcmd.journal.identity import ProcessIdentity

__all__ = ["Waiters"]


class Waiters:
    """Other processes' joins of running operations, over the journal's database."""

    _db: Database
    _me: ProcessIdentity

    def join_waiting(self, operation_id: str, *, root_run: str) -> str:
        """Record that this process waits for the operation now; the join's id, to `unjoin`."""
        join_id = uuid.uuid4().hex
        me = self._me
        with self._db.write(durable=False) as conn:
            conn.execute(
                "INSERT INTO waiters (root_run, operation_id, join_id, pid, start, boot_id,"
                " pidns, created_unix_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    root_run,
                    operation_id,
                    join_id,
                    me.pid,
                    me.start,
                    me.boot_id,
                    me.pidns,
                    unix_ms(),
                ),
            )
        return join_id

    def unjoin(self, operation_id: str, *, root_run: str, join_id: str) -> None:
        """This join's waiting ended (answered, cancelled, its deadline passed)."""
        with self._db.write(durable=False) as conn:
            conn.execute(
                "DELETE FROM waiters WHERE root_run = ? AND operation_id = ? AND join_id = ?",
                (root_run, operation_id, join_id),
            )

    def waiting(self, operation_id: str, *, root_run: str) -> list[tuple[str, ProcessIdentity]]:
        """Every join recorded for the operation, and the process waiting in it, oldest first."""
        with self._db.read() as conn:
            found = conn.execute(
                "SELECT join_id, pid, start, boot_id, pidns FROM waiters"
                " WHERE root_run = ? AND operation_id = ? ORDER BY created_unix_ms, join_id",
                (root_run, operation_id),
            ).fetchall()
        return [(join_id, ProcessIdentity(*who)) for join_id, *who in found]

    def others_waiting(self, operation_id: str, *, root_run: str) -> bool:
        """Whether a live process other than this one waits for the operation.

        Rows of dead processes are removed as they are found (never a live one's).
        """
        dead: list[str] = []
        for join_id, waiter in self.waiting(operation_id, root_run=root_run):
            if waiter == self._me:
                continue  # this process's own waiters are counted where they wait
            if liveness.alive(self._state_dir(), waiter):
                return True
            dead.append(join_id)
        self._forget(dead)
        return False

    def forget_dead_waiters(self) -> int:
        """Remove every row of a process that is gone (`recover`); how many there were."""
        with self._db.read() as conn:
            found = conn.execute("SELECT join_id, pid, start, boot_id, pidns FROM waiters")
            rows = found.fetchall()
        dead = [
            join_id
            for join_id, *who in rows
            if not liveness.alive(self._state_dir(), ProcessIdentity(*who))
        ]
        self._forget(dead)
        return len(dead)

    def _forget(self, join_ids: list[str]) -> None:
        if join_ids:
            with self._db.write(durable=False) as conn:
                conn.executemany("DELETE FROM waiters WHERE join_id = ?", [(j,) for j in join_ids])

    def _state_dir(self) -> str:
        return os.path.dirname(self._db.path)
