"""The sweep at a clean exit: this process's killed envelopes' leftovers go, others' stay."""

from __future__ import annotations

from pathlib import Path

from jigcmd.durable.recovery import sweep_own
from jigcmd.journal.envelopes import EnvelopeEntry, EnvelopeRegistry
from jigcmd.journal.identity import ProcessIdentity, current
from jigcmd.journal.store import Journal
from tests.durable.recovering import RUN, FakeBackend, begin_row, in_dead_server

# A supervisor that is gone (never alive on this boot).
GONE = ProcessIdentity(pid=1, start=0, boot_id="gone")
# Another server, alive or not: its entries and rows are `recover`'s, never the sweep's.
OTHER = ProcessIdentity(pid=1, start=1, boot_id="another")


def _failed_cleanup(journal: Journal, operation_id: str, run_id: str) -> None:
    """An uncertain row of this process whose cleanup was not proved (a killed supervisor)."""
    begin_row(journal, operation_id, run_id)
    journal.mark_uncertain(
        operation_id,
        root_run=RUN,
        reason="the envelope supervisor stopped reporting",
        cleanup_complete=False,
        problems="the envelope supervisor stopped reporting",
    )


def test_an_entry_of_this_process_whose_supervisor_died_is_released_and_dropped(
    tmp_path: Path,
) -> None:
    """Job killed, emptied, removed, then the entry dropped; another server's entry stays."""
    backend = FakeBackend()
    mine, theirs = backend.add("jigcmd-aaaa"), backend.add("jigcmd-bbbb")
    registry = EnvelopeRegistry(tmp_path)
    registry.create()
    registry.register(EnvelopeEntry(name="jigcmd-aaaa", supervisor=GONE, owner=current()))
    registry.register(EnvelopeEntry(name="jigcmd-bbbb", supervisor=GONE, owner=OTHER))
    with Journal.open(tmp_path) as journal:
        report = sweep_own(journal, backend)
    assert report.envelopes_released == ("jigcmd-aaaa",)
    assert report.clean
    assert "jigcmd-aaaa" not in backend.jobs and mine.killed == 1
    assert theirs.killed == 0
    assert [e.name for e in registry.entries()] == ["jigcmd-bbbb"]


def test_a_row_of_this_process_with_an_unproved_cleanup_is_proved_and_recorded(
    tmp_path: Path,
) -> None:
    """Its job released: cleanup `complete`, problems cleared; the row stays `uncertain`."""
    backend = FakeBackend()
    backend.add("jigcmd-r1")
    with Journal.open(tmp_path) as journal:
        _failed_cleanup(journal, "op-1", "r1")
        report = sweep_own(journal, backend)
        row = journal.get("op-1", root_run=RUN)
    assert [r.operation_id for r in report.rechecked] == ["op-1"]
    assert "jigcmd-r1" not in backend.jobs
    assert row is not None
    assert (row.state, row.cleanup, row.problems) == ("uncertain", "complete", "")
    # Its reason stays the words its answer had, which a replay repeats byte for byte.
    assert row.reason == "the envelope supervisor stopped reporting"


def test_what_cannot_be_proved_stays_recorded_as_failed_with_the_reason(tmp_path: Path) -> None:
    """A job that will not empty: cleanup stays `failed`, naming it, and its entry is kept."""
    backend = FakeBackend()
    backend.add("jigcmd-r1", stuck=True)
    backend.add("jigcmd-cccc", stuck=True)
    registry = EnvelopeRegistry(tmp_path)
    registry.create()
    registry.register(EnvelopeEntry(name="jigcmd-cccc", supervisor=GONE, owner=current()))
    with Journal.open(tmp_path) as journal:
        _failed_cleanup(journal, "op-1", "r1")
        report = sweep_own(journal, backend)
        row = journal.get("op-1", root_run=RUN)
    assert not report.clean
    assert row is not None and row.cleanup == "failed"
    assert row.problems == "cgroup job jigcmd-r1 still populated after kill"
    assert [e.name for e in registry.entries()] == ["jigcmd-cccc"]


def test_a_dead_servers_rows_are_left_to_recover(tmp_path: Path) -> None:
    """Another process's unproved cleanup is not the sweep's: untouched."""
    backend = FakeBackend()
    job = backend.add("jigcmd-r1")
    in_dead_server(tmp_path, lambda j: _failed_cleanup(j, "op-1", "r1"))
    with Journal.open(tmp_path) as journal:
        report = sweep_own(journal, backend)
        row = journal.get("op-1", root_run=RUN)
    assert report.rechecked == ()
    assert job.killed == 0
    assert row is not None and row.cleanup == "failed"


def test_an_envelope_whose_supervisor_still_lives_is_left_to_tear_itself_down(
    tmp_path: Path,
) -> None:
    """A live supervisor releases its own envelope: the sweep neither waits for it nor kills."""
    backend = FakeBackend()
    job = backend.add("jigcmd-dddd")
    registry = EnvelopeRegistry(tmp_path)
    registry.create()
    registry.register(EnvelopeEntry(name="jigcmd-dddd", supervisor=current(), owner=current()))
    with Journal.open(tmp_path) as journal:
        report = sweep_own(journal, backend)
    assert report.envelopes_released == ()
    assert job.killed == 0
    assert [e.name for e in registry.entries()] == ["jigcmd-dddd"]
