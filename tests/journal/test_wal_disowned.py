"""A commit that may have gone to a removed WAL: no more writes, and the close folds nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.journal.failures import JournalLost
from jigcmd.journal.store import Journal

_REPO = str(Path(__file__).resolve().parents[2])

# The WAL removed between the check before COMMIT and the COMMIT itself (the check is
# skipped to land there): op-2's begin goes to the removed WAL. The process then closes the
# journal and exits as a clean exit does.
_RACED = """
import sys
from pathlib import Path
from jigcmd.journal.walfile import WalFile
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal

def row(op):
    return NewRow(root_run="run-a", operation_id=op, signature="s", context="c",
                  deadline_unix_ms=0, run_id="r-" + op)

state = Path(sys.argv[1])
journal = Journal.open(state)
journal.begin(row("op-1"))
WalFile.check_uncommitted = lambda self: None
for name in ("journal.sqlite3-wal", "journal.sqlite3-shm"):
    (state / name).unlink()
for op in ("op-2", "op-3"):
    try:
        journal.begin(row(op))
    except OSError as exc:
        print(op, "refused:", exc.strerror, flush=True)
try:
    journal.close()
except Exception as exc:
    print("close:", exc, flush=True)
"""


def test_a_commit_to_a_removed_wal_is_never_folded_into_the_journal(tmp_path: Path) -> None:
    """op-2 was refused after its commit: the database never gets it; the journal is refused."""
    done = subprocess.run(
        [sys.executable, "-c", _RACED, str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": _REPO},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    # Nothing of the disowned WAL reached the database file (op-1's begin neither).
    assert b"op-2" not in (tmp_path / "journal.sqlite3").read_bytes()
    with pytest.raises(JournalLost, match=r"journal\.sqlite3-wal is missing"):
        Journal.open(tmp_path)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("op-2 refused: the journal's write-ahead log"), done.stdout
    assert lines[1].startswith("op-3 refused:"), done.stdout
    assert "journal.sqlite3-wal was removed" in lines[2], done.stdout
