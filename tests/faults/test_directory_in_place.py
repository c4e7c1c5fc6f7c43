"""A directory where the journal or a file of SQLite's beside it should be: that file named.

The journal (`journal.sqlite3`), its write-ahead log (`-wal`) and its shared-memory index
(`-shm`) each replaced by a directory; every verb that opens the journal, the writing ones
(`serve`, `recover`) and the reading ones (`runs`, `attest`, `prune --dry-run`, `doctor`),
names the directory that is in the way, and never tells the operator to move a sound journal
aside.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.test_journal_start import _jigcmd, _journal_with_a_row, _refused

_READERS = (
    ("runs",),
    ("attest", "--run-id", "run-a", "op-1"),
    ("prune", "--dry-run", "--older-than", "1d"),
)


def _with_directory_at(state: Path, name: str) -> None:
    _journal_with_a_row(state)
    (state / name).unlink(missing_ok=True)
    (state / name).mkdir()


@pytest.mark.parametrize("verb", ["serve", "recover"])
@pytest.mark.parametrize(
    ("name", "what"),
    [("journal.sqlite3-wal", "write-ahead log"), ("journal.sqlite3-shm", "shared-memory index")],
)
def test_a_directory_for_the_wal_or_shm_is_named_and_the_journal_kept(
    tmp_path: Path, verb: str, name: str, what: str
) -> None:
    """Not "a directory is where the journal file should be" nor "make it writable"."""
    state = tmp_path / "state"
    _with_directory_at(state, name)
    line = _refused(state, verb, f"a directory is where its {what} {name} should be")
    assert f"move {state / name} out of the way" in line, line
    assert f"keep {state / 'journal.sqlite3'}, the journal itself" in line, line


@pytest.mark.parametrize("args", _READERS)
def test_a_directory_for_the_journal_is_named_by_the_verbs_that_read_it(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """`runs`, `attest` and `prune --dry-run` say what `serve` says, not "disk I/O error"."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "journal.sqlite3").mkdir()
    done = _jigcmd(*args, "--state-dir", str(state))
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert "a directory is where the journal file should be" in stderr, stderr
    assert "disk I/O" not in stderr and "dmesg" not in stderr, stderr


@pytest.mark.parametrize("args", _READERS)
def test_a_directory_for_the_wal_is_named_by_the_verbs_that_read_it(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """The reading verbs name the `-wal`, never telling to move the journal itself away."""
    state = tmp_path / "state"
    _with_directory_at(state, "journal.sqlite3-wal")
    stderr = _jigcmd(*args, "--state-dir", str(state)).stderr.decode()
    assert "its write-ahead log journal.sqlite3-wal should be" in stderr, stderr
    assert f"move {state / 'journal.sqlite3'} out of the way" not in stderr, stderr


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("journal.sqlite3", "a directory is where the journal file should be"),
        ("journal.sqlite3-shm", "its shared-memory index journal.sqlite3-shm should be"),
    ],
)
def test_doctor_names_the_directory_in_the_way(tmp_path: Path, name: str, words: str) -> None:
    """doctor's state check fails as serve would, naming the directory (not the disk)."""
    state = tmp_path / "state"
    _with_directory_at(state, name)
    stdout = _jigcmd("doctor", "--state-dir", str(state)).stdout.decode()
    (line,) = [line for line in stdout.splitlines() if line.startswith("FAIL  state")]
    assert words in line, stdout
