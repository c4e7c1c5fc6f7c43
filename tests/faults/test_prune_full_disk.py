"""`jigcmd prune` on a full state disk: a dry run reads and reports; a prune frees what it can.

The state directory is on a small tmpfs of the test's own (`tests.faults.disk`), written as
servers write it (`tests/frontends/test_prune_cli.py`), then filled to the last byte.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jigcmd.cli import main
from jigcmd.journal.failures import LEAST_FREE_BYTES
from jigcmd.journal.store import Journal
from tests.faults.disk import SmallDisk
from tests.frontends.test_prune_cli import RUN, STATEMENT, populated

# Kept streams large enough that removing them leaves room to rewrite the journal.
_LARGE = b"x" * (768 * 1024)


def _prune(state: Path, *extra: str) -> list[str]:
    return ["prune", "--state-dir", str(state), "--older-than", "2d", "--json", *extra]


def _pruned(state: Path, operation_id: str) -> bool:
    with Journal.open_read_only(state) as journal:
        row = journal.get(operation_id, root_run=RUN)
    assert row is not None
    return row.pruned


def _kept(state: Path) -> list[Path]:
    return sorted(path for path in (state / "resources").rglob("*") if path.is_file())


def test_a_dry_run_on_a_full_disk_reports_what_it_would_prune_and_changes_nothing(
    small_disk: SmallDisk, capsys: pytest.CaptureFixture[str]
) -> None:
    """It only reads: the journal read as it is (no `-shm` can be made), exit 0, the counts."""
    state = populated(small_disk.path / "state")
    kept = _kept(state)
    small_disk.fill()
    assert main(_prune(state, "--dry-run")) == 0, capsys.readouterr().err
    answer = json.loads(capsys.readouterr().out)
    assert (answer["operations"], answer["resourceOperations"]) == (2, 1)
    assert not _pruned(state, "op-done")
    assert _kept(state) == kept


def test_a_prune_on_a_full_disk_removes_the_kept_resources_first_then_the_evidence(
    small_disk: SmallDisk, capsys: pytest.CaptureFixture[str]
) -> None:
    """The resources of what it prunes go first (no journal write), which makes the room the
    journal's rewrite needs: both done, as on a disk with room."""
    state = populated(small_disk.path / "state", stdout=_LARGE)
    small_disk.fill()
    assert main(_prune(state)) == 0, capsys.readouterr().err
    answer = json.loads(capsys.readouterr().out)
    assert (answer["operations"], answer["resourceOperations"]) == (2, 1)
    assert answer["resourceBytesRemoved"] >= len(_LARGE)
    assert _pruned(state, "op-done") and _pruned(state, "op-uncertain")
    assert len(_kept(state)) == 1  # the open operation's


def test_a_prune_that_cannot_make_room_says_what_it_freed_and_what_to_do(
    small_disk: SmallDisk, capsys: pytest.CaptureFixture[str]
) -> None:
    """Too little freed: exit 2 naming the full disk, what went and how much to free; nothing
    recorded is lost, and once there is room the same prune completes."""
    state = populated(small_disk.path / "state")
    small_disk.fill()
    assert main(_prune(state)) == 2
    line = capsys.readouterr().err
    assert f"the filesystem holding {state} is full" in line, line
    assert "the kept resources of 1 operation(s) past the bound" in line, line
    assert f"fix: free at least {LEAST_FREE_BYTES // 1024} KiB on it" in line, line
    assert "nothing recorded was lost" in line, line
    assert not _pruned(state, "op-done")
    with Journal.open_read_only(state) as journal:
        row = journal.get("op-done", root_run=RUN)
    assert row is not None and (row.result, row.attestation) == (b'{"exitCode": 0}', STATEMENT)

    small_disk.free()
    assert main(_prune(state)) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["operations"], answer["resourceOperations"]) == (2, 0)
