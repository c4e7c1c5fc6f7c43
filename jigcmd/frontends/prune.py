"""`jigcmd prune`: bound the state directory, keeping every operation's refusal to run again.

Closed operations older than `--older-than` lose their evidence, statements and kept
resources; each keeps a tombstone row, so a replay of it is refused, never run
(`jigcmd.durable.retention`). Closed jarvis runs older than that are deleted; the audit
trail is kept. Open operations are never touched. Safe beside running servers (small write
transactions); running it again removes nothing more.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from jigcmd.clock import unix_ms
from jigcmd.durable import retention
from jigcmd.durable.runresources import ResourcesPruned
from jigcmd.durable.statedir import StateDirError, checked_state_dir, default_state_dir
from jigcmd.journal.database import JournalError
from jigcmd.journal.failures import JournalUnusable
from jigcmd.journal.schema import SchemaError
from jigcmd.jsonio import readable

__all__ = ["prune"]

_OK, _UNUSABLE = 0, 2


def prune(state_dir: Path | None, older_than_s: int, *, dry_run: bool, as_json: bool) -> int:
    """Prune what closed before now minus `older_than_s`; 0, or 2 when it cannot."""
    cutoff_ms = unix_ms() - older_than_s * 1000
    try:
        directory = _directory(state_dir)
        if directory is None:
            journal = retention.JournalPruned((), 0, 0)
            resources = ResourcesPruned(0, 0, 0)
            size = free = 0
        else:
            journal, size, free, resources = retention.prune_state_dir(
                directory, cutoff_ms, dry_run=dry_run
            )
    except (StateDirError, JournalError, JournalUnusable, SchemaError) as exc:
        sys.stderr.write(f"jigcmd prune: {exc}\n")
        return _UNUSABLE
    summary = _Summary(dry_run, cutoff_ms, journal, size, free, resources)
    print(readable.dumps(summary.view()) if as_json else summary.sentence())
    return _OK


def _directory(state_dir: Path | None) -> Path | None:
    """The state directory to prune; None for a default one not made yet (nothing to prune)."""
    target = state_dir or default_state_dir()
    if state_dir is None and not target.exists() and not target.is_symlink():
        return None
    if state_dir is not None and _missing(target):
        raise StateDirError(
            f"--state-dir {state_dir}: no such directory, so nothing in it to prune "
            "(nothing was created)",
            "give the state directory serve and run use",
        )
    return checked_state_dir(target)


def _missing(path: Path) -> bool:
    """Whether `path` names nothing; a link loop, a denied search, is `checked_state_dir`'s to word.

    `Path.exists()` answers False for those too, and a loop would read as a missing directory.
    """
    try:
        os.stat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def _kib(count: int) -> str:
    return f"{(count + 1023) // 1024:,} KiB"


@dataclass(frozen=True, slots=True)
class _Summary:
    """What one prune removed (or, dry, would remove), and the journal file after it."""

    dry_run: bool
    cutoff_ms: int
    journal: retention.JournalPruned
    file_bytes: int
    free_bytes: int
    resources: ResourcesPruned

    def view(self) -> dict[str, object]:
        """The `--json` answer."""
        return {
            "dryRun": self.dry_run,
            "closedBefore": retention.when(self.cutoff_ms),
            "operations": len(self.journal.operations),
            "jarvisRuns": self.journal.jarvis_runs,
            "journalBytesRemoved": self.journal.removed_bytes,
            "journalFileBytes": self.file_bytes,
            "journalFreeBytes": self.free_bytes,
            "resourceOperations": self.resources.operations,
            "resourceScopes": self.resources.scopes,
            "resourceBytesRemoved": self.resources.removed_bytes,
        }

    def sentence(self) -> str:
        """The text answer."""
        verb, done = ("would prune", "to remove") if self.dry_run else ("pruned", "removed")
        return "\n".join(
            (
                f"{verb} {len(self.journal.operations)} operation(s) closed before "
                f"{retention.when(self.cutoff_ms)}: each keeps a tombstone, so a replay of it "
                "is refused, never run again",
                f"{verb} {self.journal.jarvis_runs} jarvis run(s) (the jarvis audit trail is kept)",
                f"journal: {_kib(self.journal.removed_bytes)} of evidence and statements {done}; "
                f"the file ({_kib(self.file_bytes)}) keeps its size, {_kib(self.free_bytes)} of "
                "it free for the rows that follow",
                f"resources: {self.resources.operations} operation(s) and "
                f"{self.resources.scopes} run scope(s), {_kib(self.resources.removed_bytes)} "
                f"{done}",
            )
        )
