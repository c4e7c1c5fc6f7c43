"""A run's signed statement in the journal: kept with its evidence, never on an uncertain row."""

from __future__ import annotations

from pathlib import Path

from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal

RUN = "run-a"
FIRST, FINAL = b'{"statement":"at the end"}\n', b'{"statement":"with the report"}\n'


def _journal_with_evidence(tmp_path: Path, operation_id: str = "op-1") -> Journal:
    tmp_path.mkdir(exist_ok=True)
    journal = Journal.open(tmp_path)
    journal.begin(
        NewRow(
            root_run=RUN,
            operation_id=operation_id,
            signature="sig",
            context="c",
            deadline_unix_ms=0,
            run_id=f"r-{operation_id}",
        )
    )
    assert journal.record_result(
        operation_id, root_run=RUN, outcome="evidence", result=b"{}", attestation=FIRST
    )
    return journal


def _attestation(journal: Journal, operation_id: str = "op-1") -> bytes | None:
    row = journal.get(operation_id, root_run=RUN)
    assert row is not None
    return row.attestation


def test_the_statement_is_durable_in_the_same_commit_as_the_evidence(tmp_path: Path) -> None:
    """record_result keeps the statement on the open row; a reopened journal still has it."""
    _journal_with_evidence(tmp_path).close()
    with Journal.open(tmp_path) as journal:
        row = journal.get("op-1", root_run=RUN)
        assert row is not None and row.is_open
        assert (row.result, row.attestation) == (b"{}", FIRST)


def test_the_close_replaces_it_with_the_statement_that_has_the_report(tmp_path: Path) -> None:
    """finish with a statement stores it; finish without one keeps the first."""
    with _journal_with_evidence(tmp_path) as journal:
        journal.finish(
            "op-1",
            root_run=RUN,
            outcome="evidence",
            result=b"{}",
            report=b"{}",
            cleanup_complete=True,
            attestation=FINAL,
        )
        assert _attestation(journal) == FINAL
    with _journal_with_evidence(tmp_path / "b", "op-2") as journal:
        journal.finish(
            "op-2",
            root_run=RUN,
            outcome="evidence",
            result=b"{}",
            report=b"{}",
            cleanup_complete=True,
        )
        assert _attestation(journal, "op-2") == FIRST


def test_a_lost_row_closed_done_keeps_its_statement(tmp_path: Path) -> None:
    """Recovery proving the cleanup of a row with evidence: done, the statement kept."""
    with _journal_with_evidence(tmp_path) as journal:
        assert journal.close_lost("op-1", root_run=RUN, reason="gone", cleanup_complete=True)
        row = journal.get("op-1", root_run=RUN)
        assert row is not None and row.state == "done" and row.attestation == FIRST


def test_an_uncertain_close_drops_the_statement(tmp_path: Path) -> None:
    """Unproved cleanup, a mark_uncertain, or an unconfirmed finish: no statement is left."""
    with _journal_with_evidence(tmp_path) as journal:
        assert journal.close_lost("op-1", root_run=RUN, reason="gone", cleanup_complete=False)
        row = journal.get("op-1", root_run=RUN)
        assert row is not None and row.state == "uncertain" and row.attestation is None
    with _journal_with_evidence(tmp_path / "b") as journal:
        assert journal.mark_uncertain("op-1", root_run=RUN, reason="x", cleanup_complete=True)
        assert _attestation(journal) is None
    with _journal_with_evidence(tmp_path / "c") as journal:
        journal.finish(
            "op-1",
            root_run=RUN,
            outcome="evidence",
            result=b"{}",
            report=None,
            cleanup_complete=False,
            attestation=FINAL,
        )
        assert _attestation(journal) is None
