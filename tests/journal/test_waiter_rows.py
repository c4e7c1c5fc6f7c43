"""Other processes' joins in the journal: counted while their process lives, never after."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.journal import schema
from jigcmd.journal.schema import SCHEMA_VERSION
from jigcmd.journal.store import Journal

RUN = "run-a"
# A process of its own that joins "op" in the journal given, then waits for its stdin.
_JOINER = """
import sys
from pathlib import Path
from jigcmd.journal.store import Journal
journal = Journal.open(Path(sys.argv[1]))
journal.join_waiting("op", root_run="run-a")
print("joined", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def joiner(state: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process, alive and waiting for "op" of run-a."""
    with subprocess.Popen(
        [sys.executable, "-c", _JOINER, str(state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None and process.stdout.readline() == "joined\n"
        yield process
        process.kill()


def test_a_live_joiner_elsewhere_counts_until_it_leaves(
    state: Path, joiner: subprocess.Popen[str]
) -> None:
    """Counted for its operation only; its own leaving (`unjoin`) ends it."""
    with Journal.open(state) as journal:
        assert journal.others_waiting("op", root_run=RUN)
        assert not journal.others_waiting("op", root_run="run-b")
        assert not journal.others_waiting("op-2", root_run=RUN)
        ((join_id, who),) = journal.waiting("op", root_run=RUN)
        assert who.pid == joiner.pid
        journal.unjoin("op", root_run=RUN, join_id=join_id)
        assert not journal.others_waiting("op", root_run=RUN)


def test_a_joiner_killed_while_waiting_counts_for_nothing_and_its_row_goes(
    state: Path, joiner: subprocess.Popen[str]
) -> None:
    """SIGKILL leaves its row; its liveness is judged, and the row is removed as found dead."""
    joiner.kill()
    joiner.wait()
    with Journal.open(state) as journal:
        assert len(journal.waiting("op", root_run=RUN)) == 1
        assert not journal.others_waiting("op", root_run=RUN)
        assert journal.waiting("op", root_run=RUN) == []


def test_recovery_forgets_every_dead_joiner_and_keeps_live_ones(
    state: Path, joiner: subprocess.Popen[str]
) -> None:
    """`forget_dead_waiters` (run by `recover`) removes a dead process's join, not a live one's."""
    with Journal.open(state) as journal:
        journal.join_waiting("op", root_run=RUN)
        joiner.kill()
        joiner.wait()
        assert journal.forget_dead_waiters() == 1
        # This process's own join stays (it lives), and counts for nothing here.
        assert len(journal.waiting("op", root_run=RUN)) == 1
        assert not journal.others_waiting("op", root_run=RUN)


def test_a_version_8_journal_gets_the_waiters_table(state: Path) -> None:
    """Migrated in one step, as every schema change is: its rows stay, no join is recorded."""
    raw = sqlite3.connect(state / "journal.sqlite3", isolation_level=None)
    try:
        for step in schema._STEPS[:8]:
            for statement in schema._statements(step):
                raw.execute(statement)
        raw.execute("PRAGMA user_version = 8")
    finally:
        raw.close()
    with Journal.open(state) as journal:
        assert journal.settings()["user_version"] == SCHEMA_VERSION == 9
        assert journal.waiting("op", root_run=RUN) == []
        journal.join_waiting("op", root_run=RUN)
        assert len(journal.waiting("op", root_run=RUN)) == 1
