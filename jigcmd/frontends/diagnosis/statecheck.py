"""`jigcmd doctor`'s state line: an existing, safe state directory's journal, read as it is.

What serve and run would refuse with is a failed check in their words (too little free space,
a warning: they start, and refuse each call that must be recorded); nothing is created
(`Journal.open_read_only`, as `jigcmd runs` reads it); the sizes kept are said, and past a
threshold the fix, `jigcmd prune`; runs left open by a server that is gone, with the fix
`jigcmd recover` (nothing is fenced here); envelopes registered by a server that is gone
(`<state>/envelopes/`: a killed server's jobs stay on the host until recovery releases them,
whatever the journal's rows say); a recovery pass lock held, and by whom.
"""

from __future__ import annotations

import contextlib
import shlex
from pathlib import Path

from jigcmd.durable.recovery import owner_gone
from jigcmd.durable.recoverylock import LOCK_NAME, WAIT_LIMIT, holder_pid
from jigcmd.durable.runresources import RunResources
from jigcmd.frontends.diagnosis.verdicts import Check
from jigcmd.journal import identity, liveness
from jigcmd.journal.envelopes import EnvelopeRegistry
from jigcmd.journal.failures import (
    CALLS_REFUSED,
    JournalUnusable,
    filesystem_full,
    no_room_to_open,
    unwritable,
)
from jigcmd.journal.presence import holds_journal
from jigcmd.journal.reservations import default_slots, slots_held
from jigcmd.journal.schema import SCHEMA_VERSION, OlderSchema, SchemaError
from jigcmd.journal.store import DB_NAME, Journal

__all__ = ["LARGE_STATE_BYTES", "journal_check"]


def journal_check(path: Path) -> Check:
    """The state check of an existing, safe state directory, opening its journal read only."""

    # What serve and run would refuse with is a failed check in their words, not a crash.
    refusal = unwritable(path / DB_NAME)
    if (
        refusal is not None
        and filesystem_full(path)
        and holds_journal(path)
        and not no_room_to_open(path)
    ):
        # serve and run start on it and answer replays; each new call is refused in these words.
        detail = f"journal {refusal.path}: {refusal.cause}; {CALLS_REFUSED}"
        return Check("state", "warn", detail, refusal.fix)
    if refusal is not None:
        return Check("state", "FAIL", f"journal {refusal.path}: {refusal.cause}", refusal.fix)
    if not holds_journal(path):
        made = (
            f"only the empty {DB_NAME} a start that failed left"
            if (path / DB_NAME).exists()
            else "nothing was created"
        )
        return Check("state", "ok", f"{path}: no journal yet ({made}); serve and run make one")
    try:
        with Journal.open_read_only(path) as journal:
            failures = journal.cleanup_failures()
            open_rows = journal.open_rows()
        # Left open by a server that is dead (killed): no one closes them but recovery.
        gone = [row.operation_id for row in open_rows if owner_gone(path, row)]
        orphaned = _orphaned_envelopes(path)
    except JournalUnusable as exc:
        return Check("state", "FAIL", f"journal {exc.path}: {exc.cause}", exc.fix)
    except OlderSchema as exc:
        # serve and run migrate it as they open it: an upgrade is no failure of the machine.
        return Check(
            "state",
            "warn",
            f"the journal is at schema version {exc.version}, older than this jigcmd's "
            f"({SCHEMA_VERSION}): serve, run and `jigcmd recover` bring it up to date as they "
            "open it; until then the verbs that only read it (runs, attest, jarvis-audit, "
            "prune --dry-run, this check) read nothing in it",
        )
    except SchemaError as exc:
        return Check("state", "FAIL", str(exc))
    journal_bytes, resources = _kept_bytes(path)
    try:
        held = slots_held(path, default_slots())
    except OSError as exc:
        # A slot file that is a link or a FIFO (never waited on): serve would fail on it too.
        return Check("state", "FAIL", f"envelope slot {exc.strerror or exc}")
    detail = (
        f"{path}: {len(open_rows)} run(s) open, {held} of "
        f"{default_slots()} default envelope slot(s) in use; journal {_mib(journal_bytes)}, kept "
        f"resources {_mib(resources)}"
    )
    quoted = shlex.quote(str(path))  # the commands below are pasted into a shell
    if failures:
        listed = "; ".join(f"{row.operation_id}: {row.problems or row.reason}" for row in failures)
        return Check(
            "state",
            "warn",
            f"{detail}; {len(failures)} cleanup(s) NOT confirmed: {listed}",
            f"inspect and run `jigcmd recover --state-dir {quoted}`; it re-checks them",
        )
    if gone:
        return Check(
            "state",
            "warn",
            f"{detail}; {len(gone)} of them left open by a server that is gone: {', '.join(gone)}",
            f"run `jigcmd recover --state-dir {quoted}`: it fences their runs and closes them",
        )
    if orphaned:
        shown = ", ".join(orphaned[:5]) + ("" if len(orphaned) <= 5 else ", …")
        return Check(
            "state",
            "warn",
            f"{detail}; {len(orphaned)} envelope(s) registered by a server that is gone, "
            f"their jobs perhaps still on the host: {shown}",
            f"run `jigcmd recover --state-dir {quoted}`: it releases them",
        )
    holder = holder_pid(path)
    if holder is not None:
        # Start-up and `jigcmd recover` wait for it (a while), then recover past it.
        return Check(
            "state",
            "warn",
            f"{detail}; {path / LOCK_NAME} is held by pid {holder}: a recovery pass is "
            "running, or its process is stopped (start-up waits "
            f"{WAIT_LIMIT:.0f} s for it, then recovers anyway)",
            f"if it stays held, see whether pid {holder} is stopped (`ps -o stat= -p {holder}`: "
            "T) and resume or end it",
        )
    if journal_bytes + resources >= LARGE_STATE_BYTES:
        return Check(
            "state",
            "warn",
            f"{detail}; every recorded cleanup confirmed; it grows with every call",
            f"bound it: `jigcmd prune --state-dir {quoted} --older-than 30d` (or the age your "
            'evidence must be kept for; docs/deployment.md, "Bounding the state directory")',
        )
    return Check("state", "ok", detail + "; every recorded cleanup confirmed")


# Past this, journal and kept resources together, the state check points at `jigcmd prune`:
# about 25,000 calls at the 10-17 KB a call measured (docs/deployment.md).
LARGE_STATE_BYTES = 256 * 1024 * 1024


def _orphaned_envelopes(path: Path) -> list[str]:
    """The registered envelopes whose server is dead, judged as recovery judges (nothing tidied)."""
    return [
        entry.name
        for entry in EnvelopeRegistry(path).entries()
        if entry.owner != identity.current() and not liveness.alive(path, entry.owner, tidy=False)
    ]


def _kept_bytes(path: Path) -> tuple[int, int]:
    """The bytes the journal (its WAL too) and the kept resources take."""

    journal = 0
    for name in (DB_NAME, f"{DB_NAME}-wal"):
        with contextlib.suppress(OSError):
            journal += (path / name).stat().st_size
    return journal, RunResources(path).size()


def _mib(count: int) -> str:
    return f"{count / (1024 * 1024):,.1f} MiB"
