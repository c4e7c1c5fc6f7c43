"""The empty journal file a first start on a full disk leaves: no journal yet, not an old one.

SQLite makes `journal.sqlite3` before it can write a page; the start is refused (the disk is
full) and the empty file stays. The verbs that only read (`runs`, `attest`, `prune --dry-run`,
`jarvis-audit`, `doctor`) read it as a directory with no journal, not as "schema version 0";
an empty file beside the marker of a journal that was there is still refused as lost.
"""

from __future__ import annotations

from pathlib import Path

from tests.faults.disk import SmallDisk
from tests.faults.test_journal_start import _jigcmd, _journal_with_a_row


def _left_by_a_start_on_a_full_disk(disk: SmallDisk) -> Path:
    state = disk.path / "state"
    state.mkdir(mode=0o700)
    disk.fill()
    refused = _jigcmd("recover", "--state-dir", str(state))
    assert refused.returncode == 2 and b"full" in refused.stderr, refused.stderr
    assert sorted(path.name for path in state.iterdir()) == ["journal.sqlite3"]
    assert (state / "journal.sqlite3").stat().st_size == 0
    return state


def _reads_as_no_journal(state: Path, *, full: bool) -> None:
    listed = _jigcmd("runs", "--state-dir", str(state))
    assert (listed.returncode, listed.stdout) == (0, b"no runs\n"), listed.stderr
    for args in (
        ("prune", "--dry-run", "--older-than", "1d"),
        ("jarvis-audit",),
    ):
        done = _jigcmd(*args, "--state-dir", str(state))
        assert done.returncode == 0, done.stderr
        assert b"schema version" not in done.stderr, done.stderr
    attest = _jigcmd("attest", "--run-id", "run-a", "op-1", "--state-dir", str(state))
    assert b"no operation 'op-1' of run 'run-a'" in attest.stderr, attest.stderr
    doctor = _jigcmd("doctor", "--state-dir", str(state)).stdout.decode()
    (line,) = [line for line in doctor.splitlines() if line.split()[1:2] == ["state"]]
    # On the full disk doctor fails the state for that, as serve would not start there.
    assert ("is full" if full else "no journal yet") in line, line


def test_the_empty_file_a_refused_start_left_reads_as_no_journal_yet(
    small_disk: SmallDisk,
) -> None:
    """While the disk is full and after: "no runs"; then a start makes the journal there."""
    state = _left_by_a_start_on_a_full_disk(small_disk)
    _reads_as_no_journal(state, full=True)
    small_disk.free()
    _reads_as_no_journal(state, full=False)
    recovered = _jigcmd("recover", "--state-dir", str(state))
    assert recovered.returncode == 0, recovered.stderr
    assert (_jigcmd("runs", "--state-dir", str(state)).stdout) == b"no runs\n"


def test_an_empty_journal_file_beside_a_marker_is_still_a_lost_journal(tmp_path: Path) -> None:
    """A journal was here (its marker says so): emptied, it is refused, never "no runs"."""
    state = tmp_path / "state"
    _journal_with_a_row(state)
    (state / "journal.sqlite3").write_bytes(b"")
    listed = _jigcmd("runs", "--state-dir", str(state))
    assert listed.returncode == 2, listed.stdout
    assert b"holds no journal" in listed.stderr, listed.stderr
