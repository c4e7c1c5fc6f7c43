"""`jigcmd runs`: the state directory's runs and their operations, changing none of them.

One line per operation, grouped by the caller's run (`--run-id` of `serve`): its id, state,
outcome, cleanup, envelope and when it was created and finished; an open one whose server
is provably dead (killed) says so, and that `jigcmd recover` fences it. `--json` prints one JSON
object per run with its operations, for a coordinator's scripts. No record is changed: a
journal that does not exist yet is "no runs", not a new file.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import msgspec

from jigcmd.durable.recovery import owner_gone, pending
from jigcmd.durable.statedir import (
    StateDirError,
    checked_state_dir,
    default_state_dir,
    slot_file_refusal,
)
from jigcmd.journal.failures import JournalUnusable
from jigcmd.journal.presence import holds_journal
from jigcmd.journal.rows import Row
from jigcmd.journal.schema import SchemaError
from jigcmd.journal.store import Journal
from jigcmd.jsonio import readable

__all__ = ["list_runs", "operation_view", "runs"]

_failure = msgspec.json.Decoder(dict[str, object])
# What an open operation whose server is gone waits for (`runs` fences nothing itself).
_GONE = "owner gone; `jigcmd recover` fences it"
# A row a recovery pass closed and was stopped before it proved the cleanup: not final.
_PENDING = "not yet confirmed (a recovery pass was interrupted; `jigcmd recover` proves it)"
# A cleanup not proved is proved again later, never assumed: by whom.
_FAILED = "failed (not proved; its server's clean exit or `jigcmd recover` checks it again)"
_trace = msgspec.json.Decoder(dict[str, str])


def list_runs(state_dir: Path) -> list[Row]:
    """Every operation of the journal in `state_dir`, by run, oldest first; changes none.

    The journal is opened read only (its marker checked, nothing written), on a read-only
    mount too; a directory without one is no runs, and gets none. Raises `JournalUnusable`
    or `SchemaError` when it cannot be read.
    """
    if not holds_journal(state_dir):
        return []
    with Journal.open_read_only(state_dir) as journal:
        rows = journal.rows()
    return sorted(rows, key=lambda row: row.root_run)


_NONE_BUT_JARVIS = "no Project Command runs; jarvis runs: jigcmd jarvis-audit"


def _has_jarvis_rows(state_dir: Path | None) -> bool:
    """Whether the journal holds jarvis's audit rows (its runs, which `runs` does not list)."""
    directory = _directory(state_dir)
    if not holds_journal(directory):
        return False
    with Journal.open_read_only(directory) as journal:
        return bool(journal.audit_rows(1))


def _directory(state_dir: Path | None) -> Path:
    """The directory to read, checked as every verb checks it; creates nothing.

    A `--state-dir` that does not exist is refused (a typo, most likely), as is one others
    may write (its journal could be anyone's); the default directory not made yet holds no
    runs.
    """
    if state_dir is None and not os.path.lexists(default_state_dir()):
        return default_state_dir()
    # Slot files are never opened here: one serve refuses (a FIFO) hides no run.
    return checked_state_dir(state_dir or default_state_dir(), slot_files=False)


def _when(unix_ms: int | None) -> str | None:
    if unix_ms is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix_ms / 1000))


def _ending(row: Row) -> str | None:
    """What the operation ended with: `evidence`, a failure code, or `UNCERTAIN`."""
    if row.pruned and row.result is not None:
        # Its tombstone keeps what it ended with (`jigcmd.durable.retention`).
        pruned = _failure.decode(row.result).get("details")
        if isinstance(pruned, dict) and isinstance(pruned.get("pruned"), dict):
            return f"{pruned['pruned'].get('ending')} (pruned)"
    if row.state == "uncertain":
        return "UNCERTAIN"
    if row.is_open or row.result is None:
        return None
    if row.outcome == "failure":
        code = _failure.decode(row.result).get("code")
        return str(code)
    return "evidence"


def operation_view(row: Row, *, gone: bool = False) -> dict[str, object]:
    """One operation as `runs --json` prints it; `gone`: open, and its owner provably dead."""
    return {
        "operationId": row.operation_id,
        "state": row.state,
        "ownerGone": gone,
        "ending": _ending(row),
        "cleanup": row.cleanup,
        "cleanupPending": pending(row),
        "envelope": row.run_id,
        "context": row.context,
        "created": _when(row.created_unix_ms),
        "finished": _when(row.finished_unix_ms),
        "reason": row.reason or None,
        "trace": _trace.decode(row.trace) if row.trace else None,
    }


def runs(state_dir: Path | None, *, run_id: str | None = None, as_json: bool = False) -> int:
    """Print the runs and their operations; 0, or 2 when the directory or journal is unusable."""
    try:
        directory = _directory(state_dir)
        if (refused := slot_file_refusal(directory)) is not None:
            sys.stderr.write(f"jigcmd runs: warning: {refused}; serve and run refuse to start\n")
        # Each with whether it is open and its server dead (killed): recovery's to close.
        rows = [(row, owner_gone(directory, row)) for row in list_runs(directory)]
    except (StateDirError, JournalUnusable, SchemaError) as exc:
        sys.stderr.write(f"jigcmd runs: {exc}\n")
        return 2
    grouped: dict[str, list[tuple[Row, bool]]] = {}
    for row, gone in rows:
        if run_id is None or row.root_run == run_id:
            grouped.setdefault(row.root_run, []).append((row, gone))
    if as_json:
        for name, operations in grouped.items():
            views = [operation_view(row, gone=gone) for row, gone in operations]
            print(readable.dumps({"runId": name, "operations": views}))
        return 0
    if run_id is not None and not grouped:
        print(f"no run {run_id}")
    elif not grouped:
        # jarvis's runs are kept apart (`jigcmd jarvis-audit`): "no runs" would deny them.
        print(_NONE_BUT_JARVIS if _has_jarvis_rows(state_dir) else "no runs")
    for name, operations in grouped.items():
        print(f"run {name or '(recorded before run ids)'}: {len(operations)} operation(s)")
        for row, gone in operations:
            ending = _ending(row) or "-"
            cleanup = _cleanup_words(row)
            state = f"{row.state} ({_GONE})" if gone else row.state
            print(
                f"  {row.operation_id}  {state}  ending {ending}  cleanup {cleanup}  "
                f"envelope {row.run_id}  created {_when(row.created_unix_ms)}"
            )
    return 0


def _cleanup_words(row: Row) -> str:
    """The row's cleanup as `runs` prints it, saying what a verdict not yet final waits for."""
    if pending(row):
        return _PENDING
    if row.cleanup == "failed":
        return _FAILED
    return row.cleanup or "-"
