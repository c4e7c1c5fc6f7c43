"""A journal whose state directory is removed while open: refused writes, a worded close."""

from __future__ import annotations

import errno
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.durable.statedir import prepare_state_dir
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal, JournalUnusable

_REPO = str(Path(__file__).resolve().parents[2])

# Opens a journal, removes its state directory, and exits without closing it.
_ABANDONED = """
import shutil
import sys
from pathlib import Path
from jigcmd.journal.store import Journal
journal = Journal.open(Path(sys.argv[1]))
shutil.rmtree(sys.argv[1])
print("abandoned", flush=True)
"""


def _new(operation_id: str) -> NewRow:
    return NewRow(
        root_run="run-a",
        operation_id=operation_id,
        signature="s",
        context="c",
        deadline_unix_ms=0,
        run_id=f"r-{operation_id}",
    )


def test_a_write_after_the_state_dir_was_removed_is_refused_naming_it(tmp_path: Path) -> None:
    """SQLite would go on writing to the unlinked file; the journal refuses instead."""
    state = prepare_state_dir(tmp_path / "state")
    journal = Journal.open(state)
    journal.begin(_new("op-1"))
    shutil.rmtree(state)
    with pytest.raises(OSError, match="journal file was removed while in use") as refused:
        journal.begin(_new("op-2"))
    assert refused.value.errno == errno.ENOENT
    assert str(state) in str(refused.value)
    with pytest.raises(JournalUnusable, match=r"fix: leave .* in place"):
        journal.close()
    journal.close()  # closed already: nothing more to say


def test_a_state_dir_replaced_by_another_is_not_written_through_the_old_journal(
    tmp_path: Path,
) -> None:
    """A new directory at the same path is another journal: the old connection is refused."""
    state = prepare_state_dir(tmp_path / "state")
    journal = Journal.open(state)
    shutil.rmtree(state)
    with Journal.open(prepare_state_dir(state)) as fresh:
        fresh.begin(_new("op-new"))
        with pytest.raises(OSError, match="deleted or replaced"):
            journal.begin(_new("op-old"))
        with pytest.raises(JournalUnusable):
            journal.close()
        assert fresh.get("op-old", root_run="run-a") is None


def test_a_journal_left_open_on_a_removed_dir_says_nothing_at_interpreter_exit(
    tmp_path: Path,
) -> None:
    """The finalizer never raises: exit 0 and an empty stderr, not a traceback."""
    state = prepare_state_dir(tmp_path / "state")
    done = subprocess.run(
        [sys.executable, "-c", _ABANDONED, str(state)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=_REPO,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "abandoned\n", "")


def test_a_clean_close_still_marks_the_journal_clean(tmp_path: Path) -> None:
    """The usual close is unchanged: no WAL left, the marker says clean, it reopens."""
    state = prepare_state_dir(tmp_path / "state")
    with Journal.open(state) as journal:
        journal.begin(_new("op-1"))
    assert not (state / "journal.sqlite3-wal").exists()
    assert b'"clean":true' in (state / "journal.mark").read_bytes()
    with Journal.open(state) as again:
        assert again.get("op-1", root_run="run-a") is not None
