"""Retention: removing what closed operations and jarvis runs kept, past an age bound.

Nothing is retried blindly, so a pruned operation cannot simply vanish: its journal row
stays as a tombstone (its key, signature, envelope and times), its evidence, report, test
report and signed statement removed, and its recorded answer replaced by a refusal that a
replay of the operation id in that run gets in either dialect ("operation X of run R was
pruned on DATE; its evidence is gone; it is not run again", `UNAVAILABLE`, with what it
ended with and its statement's digest at `details.pruned`). Open rows are never touched.
Closed jarvis runs past the bound are deleted (nothing replays them by id); the audit trail
is append-only and kept.

Rows are rewritten in small write transactions (`Database.write`), so servers sharing the
journal go on writing between them. SQLite keeps the freed pages in the file for the rows
that follow rather than shrinking it: a VACUUM would hold the write lock for as long as it
copies the whole journal (every server's next `begin` waiting behind it) and needs its size
again in free space, and `auto_vacuum` cannot be turned on for an existing journal without
one. So a journal pruned regularly grows by its tombstones only (docs/deployment.md).
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec

from jigcmd.clock import unix_ms
from jigcmd.durable.runresources import ResourcesPruned, RunResources
from jigcmd.errors import Code
from jigcmd.journal.database import Database
from jigcmd.journal.failures import (
    LEAST_FREE_BYTES,
    JournalUnusable,
    filesystem_full,
    unusable,
)
from jigcmd.journal.presence import holds_journal
from jigcmd.journal.rows import PRUNED_REASON

__all__ = [
    "MAX_DURATION_S",
    "MIN_RETAIN_S",
    "JournalPruned",
    "free_bytes",
    "open_keys",
    "parse_duration",
    "prune_journal",
    "prune_state_dir",
    "pruned_message",
    "when",
    "would_prune",
]

# Rows rewritten per write transaction: short enough that a server's write waits a moment.
_BATCH = 100
# `--retain`'s least: a shorter one would prune answers a retrying caller still asks for.
MIN_RETAIN_S = 3600
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
# Digits enough for any unit's longest duration, few enough to refuse a number as text fast.
_DURATION = re.compile(r"([0-9]{1,18})([smhdw])")
# The longest duration (about 31 years): every bound stays after 1970, and a `--retain`
# passes its child prune the same bound in seconds.
MAX_DURATION_S = 999_999_999
_CLOSED = "state IN ('done', 'uncertain')"
# `substr`, not LIKE: LIKE folds case.
_NOT_PRUNED = (
    f"NOT (outcome = 'failure' AND substr(reason, 1, {len(PRUNED_REASON)}) = '{PRUNED_REASON}')"
)
_CANDIDATES = f"{_CLOSED} AND {_NOT_PRUNED} AND COALESCE(finished_unix_ms, updated_unix_ms) < ?"
# What a pruned row gives up: every column that grows with the run.
_KEPT_BYTES = (
    "COALESCE(length(result), 0) + COALESCE(length(report), 0)"
    " + COALESCE(length(attestation), 0) + COALESCE(length(tests), 0)"
    " + COALESCE(length(trace), 0)"
)
_JARVIS_CLOSED = "status != 'running' AND COALESCE(finished_unix_ms, created_unix_ms) < ?"
_JARVIS_BYTES = (
    "length(argv) + length(stdout) + length(stderr) + length(timings)"
    " + COALESCE(length(attestation), 0) + COALESCE(length(detail), 0)"
)
_decode_result = msgspec.json.Decoder(dict[str, object]).decode
_encode = msgspec.json.Encoder().encode


def parse_duration(text: str) -> int:
    """Seconds of a duration such as `7d`, `12h`, `90m`; ValueError naming the form."""
    found = _DURATION.fullmatch(text)
    if found is None:
        raise ValueError(
            f"{text!r} is not a duration: a whole number and one unit, s, m, h, d or w "
            # Examples `--retain` takes too (at least an hour), as well as `--older-than`.
            "(7d, 12h, 90m)"
        )
    seconds = int(found.group(1)) * _UNITS[found.group(2)]
    if seconds > MAX_DURATION_S:
        raise ValueError(
            f"{text!r} is longer than the longest duration, {MAX_DURATION_S:,} s (about 31 years)"
        )
    return seconds


def when(unix_ms: int) -> str:
    """A time as the journal's readers print it (UTC, to the second)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix_ms / 1000))


def pruned_message(operation_id: str, root_run: str, pruned_unix_ms: int) -> str:
    """What a replay of a pruned operation is told."""
    return (
        f"operation {operation_id!r} of run {root_run!r} was pruned on {when(pruned_unix_ms)}; "
        "its evidence is gone; it is not run again"
    )


@dataclass(frozen=True, slots=True)
class JournalPruned:
    """What one prune removed from the journal (or, dry, would remove)."""

    # (run, operation id) of every operation pruned.
    operations: tuple[tuple[str, str], ...]
    jarvis_runs: int
    # The bytes of evidence, statements and jarvis output removed (the rows' payloads).
    removed_bytes: int


def _recorded(found: sqlite3.Row) -> dict[str, object]:
    """The row's recorded answer as JSON (evidence or failure); empty when there is none."""
    if found["result"] is None:
        return {}
    try:
        return _decode_result(found["result"])
    except msgspec.DecodeError:
        return {}


def _ending(found: sqlite3.Row) -> tuple[str, object]:
    """What a closed row ended with, as `jigcmd runs` says it, and the candidate's exit code."""
    if found["state"] == "uncertain":
        return "UNCERTAIN", None
    recorded = _recorded(found)
    if found["outcome"] == "failure":
        return str(recorded.get("code", "failure")), None
    return "evidence", recorded.get("exitCode")


def _tombstone(found: sqlite3.Row, now_ms: int) -> bytes:
    """The refusal a pruned row answers with from now on (a recorded failure)."""
    statement = found["attestation"]
    ending, exit_code = _ending(found)
    details = {
        "pruned": {
            "ending": ending,
            "exitCode": exit_code,
            "closed": when(found["finished_unix_ms"] or found["updated_unix_ms"]),
            "prunedAt": when(now_ms),
            "statementSha256": None if statement is None else hashlib.sha256(statement).hexdigest(),
        }
    }
    message = pruned_message(found["operation_id"], found["root_run"], now_ms)
    return _encode({"code": Code.UNAVAILABLE.value, "message": message, "details": details})


def _prune_batch(db: Database, cutoff_ms: int, now_ms: int) -> tuple[list[tuple[str, str]], int]:
    """Tombstone up to `_BATCH` candidate rows in one write transaction."""
    pruned: list[tuple[str, str]] = []
    removed = 0
    with db.write() as conn:
        found = conn.execute(
            "SELECT root_run, operation_id, state, outcome, result, attestation,"  # noqa: S608 - our own constants
            f" finished_unix_ms, updated_unix_ms, {_KEPT_BYTES} AS kept"
            f" FROM operations WHERE {_CANDIDATES} LIMIT ?",
            (cutoff_ms, _BATCH),
        ).fetchall()
        for row in found:
            conn.execute(
                "UPDATE operations SET outcome = 'failure', result = ?, report = NULL,"
                " attestation = NULL, tests = NULL, trace = NULL, reason = ?,"
                " updated_unix_ms = ? WHERE root_run = ? AND operation_id = ?",
                (
                    _tombstone(row, now_ms),
                    f"{PRUNED_REASON}{when(now_ms)}: its evidence is gone",
                    now_ms,
                    row["root_run"],
                    row["operation_id"],
                ),
            )
            pruned.append((row["root_run"], row["operation_id"]))
            removed += row["kept"]
    return pruned, removed


def _prune_jarvis_batch(db: Database, cutoff_ms: int) -> tuple[int, int]:
    with db.write() as conn:
        (count, size) = conn.execute(
            f"SELECT count(*), COALESCE(sum({_JARVIS_BYTES}), 0) FROM (SELECT * FROM jarvis_runs"  # noqa: S608 - our own constants
            f" WHERE {_JARVIS_CLOSED} ORDER BY run_id LIMIT ?)",
            (cutoff_ms, _BATCH),
        ).fetchone()
        conn.execute(
            "DELETE FROM jarvis_runs WHERE run_id IN (SELECT run_id FROM jarvis_runs"  # noqa: S608 - our own constants
            f" WHERE {_JARVIS_CLOSED} ORDER BY run_id LIMIT ?)",
            (cutoff_ms, _BATCH),
        )
    return int(count), int(size)


def prune_journal(db: Database, cutoff_ms: int) -> JournalPruned:
    """Tombstone every closed operation and delete every closed jarvis run before `cutoff_ms`.

    Batch by batch, each its own durable write; idempotent (a tombstone is not pruned again).
    """
    now_ms = unix_ms()
    operations: list[tuple[str, str]] = []
    removed = 0
    while True:
        batch, size = _prune_batch(db, cutoff_ms, now_ms)
        operations += batch
        removed += size
        if len(batch) < _BATCH:
            break
    runs = 0
    while True:
        count, size = _prune_jarvis_batch(db, cutoff_ms)
        runs += count
        removed += size
        if count < _BATCH:
            break
    return JournalPruned(tuple(operations), runs, removed)


def would_prune(db: Database, cutoff_ms: int) -> JournalPruned:
    """What `prune_journal` would remove now, read only."""
    with db.read() as conn:
        found = conn.execute(
            f"SELECT root_run, operation_id, {_KEPT_BYTES} AS kept FROM operations"  # noqa: S608 - our own constants
            f" WHERE {_CANDIDATES}",
            (cutoff_ms,),
        ).fetchall()
        (runs, jarvis_bytes) = conn.execute(
            f"SELECT count(*), COALESCE(sum({_JARVIS_BYTES}), 0) FROM jarvis_runs"  # noqa: S608 - our own constants
            f" WHERE {_JARVIS_CLOSED}",
            (cutoff_ms,),
        ).fetchone()
    operations = tuple((row["root_run"], row["operation_id"]) for row in found)
    removed = sum(row["kept"] for row in found) + int(jarvis_bytes)
    return JournalPruned(operations, int(runs), removed)


def free_bytes(db: Database) -> tuple[int, int]:
    """The journal's size in pages and its pages free for reuse, in bytes."""
    with db.read() as conn:
        (size,) = conn.execute("PRAGMA page_size").fetchone()
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        (free,) = conn.execute("PRAGMA freelist_count").fetchone()
    return int(pages) * int(size), int(free) * int(size)


def open_keys(db: Database) -> list[tuple[str, str]]:
    """The resource scopes (run, else session) and ids of every open operation."""
    with db.read() as conn:
        found = conn.execute(
            "SELECT root_run, context, operation_id FROM operations"
            " WHERE state IN ('dispatching', 'running')"
        ).fetchall()
    return [(scope, row["operation_id"]) for row in found for scope in (row[0], row[1])]


def prune_state_dir(
    directory: Path, cutoff_ms: int, *, dry_run: bool
) -> tuple[JournalPruned, int, int, ResourcesPruned]:
    """Prune (or, dry, count) a state directory's journal and kept resources before
    `cutoff_ms`; also the journal file's size and free bytes after.

    A dry run only reads, on a full disk too. A prune on a full filesystem
    (`filesystem_full`) first removes the kept resources of what it may prune, found by
    reading the journal: that frees space without writing it, and the journal's rewrite,
    which needs room to grow its WAL, follows. Raises `JournalUnusable` when the journal
    cannot be opened or written (on a full disk, saying what was freed and what to do).
    """
    freed = None
    if not dry_run and filesystem_full(directory):
        freed = _resources_first(directory, cutoff_ms)
    keys: list[tuple[str, str]]
    if not holds_journal(directory):
        journal, size, free, keys = JournalPruned((), 0, 0), 0, 0, []
    else:
        try:
            journal, size, free, keys = _journal(directory, cutoff_ms, dry_run=dry_run)
        except JournalUnusable as exc:
            if freed is None or not filesystem_full(directory):
                raise
            raise _still_full(exc, freed) from exc
    resources = RunResources(directory).prune_before(
        cutoff_ms / 1000, pruned=journal.operations, open_keys=keys, dry_run=dry_run
    )
    return journal, size, free, resources if freed is None else _both(freed, resources)


def _journal(
    directory: Path, cutoff_ms: int, *, dry_run: bool
) -> tuple[JournalPruned, int, int, list[tuple[str, str]]]:
    """The journal's prune (or, dry, its count), its size and free bytes, the open keys."""
    db = Database.open_read_only(directory) if dry_run else Database.open(directory)
    try:
        journal = would_prune(db, cutoff_ms) if dry_run else prune_journal(db, cutoff_ms)
        size, free = free_bytes(db)
        # Read after the prune: an operation begun since keeps its resources from now on.
        return journal, size, free, open_keys(db)
    except (sqlite3.Error, OSError) as exc:
        raise unusable(db.path, exc) from exc
    finally:
        db.close()


def _resources_first(directory: Path, cutoff_ms: int) -> ResourcesPruned:
    """Remove the kept resources a prune would, the journal only read (it cannot grow now)."""
    doomed, keys = JournalPruned((), 0, 0), list[tuple[str, str]]()
    if holds_journal(directory):
        doomed, _, _, keys = _journal(directory, cutoff_ms, dry_run=True)
    return RunResources(directory).prune_before(
        cutoff_ms / 1000, pruned=doomed.operations, open_keys=keys
    )


def _still_full(exc: JournalUnusable, freed: ResourcesPruned) -> JournalUnusable:
    """The refusal of a journal still too full to rewrite once the resources went first."""
    kib = (freed.removed_bytes + 1023) // 1024
    first = (
        f"the kept resources of {freed.operations} operation(s) past the bound ({kib:,} KiB) "
        "were removed first, which left too little room to rewrite the journal"
        if freed.operations
        else "no kept resources past the bound were there to remove first and make room"
    )
    fix = (
        f"free at least {LEAST_FREE_BYTES // 1024} KiB on it (other files there, or a bigger "
        "filesystem), then run this prune again; nothing recorded was lost, so keep the "
        "journal (`--dry-run` reads it meanwhile)"
    )
    cause = f"{exc.cause}; {first}"
    return JournalUnusable(exc.path, cause, fix)


def _both(first: ResourcesPruned, then: ResourcesPruned) -> ResourcesPruned:
    return ResourcesPruned(
        first.operations + then.operations,
        first.scopes + then.scopes,
        first.removed_bytes + then.removed_bytes,
    )
