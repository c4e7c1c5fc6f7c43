"""The concise text of a run's evidence: how it ended, each stream's head and tail, a budget."""

from __future__ import annotations

from jigcmd.evidence import Evidence, StreamText
from jigcmd.protocol.summary import BUDGET_BYTES, HEAD_BYTES, TAIL_BYTES, summary


def _evidence(out: str, err: str = "", *, truncated: bool = False, **changes: object) -> Evidence:
    fields: dict[str, object] = {
        "candidate_digest": "sha256:" + "0" * 64,
        "command": "tests",
        "invocation": ["bun", "test", "test/project.test.ts"],
        "stdin_digest": "sha256:" + "e" * 64,
        "stdout": StreamText(text=out, truncated=truncated),
        "stderr": StreamText(text=err, truncated=False),
        "exit_code": 1,
        "signal": None,
        "stop_reason": "exited",
    }
    fields.update(changes)
    return Evidence(**fields)  # type: ignore[arg-type]


def test_a_short_run_is_shown_whole_with_how_it_ended() -> None:
    """The command line, the exit code, the stop reason, the cleanup, and both streams."""
    text = summary(_evidence("1 fail\n", "oops\n"))
    assert text.splitlines()[0] == (
        "`bun test test/project.test.ts` exited with code 1 (stop reason: exited; "
        "cleanup complete)."
    )
    assert "stdout (7 bytes):\n1 fail\n" in text
    assert "stderr (5 bytes):\noops\n" in text


def test_a_killed_run_names_its_signal_and_an_empty_stream_says_so() -> None:
    """A signal instead of an exit code; `empty` for a silent stream."""
    text = summary(_evidence("", exit_code=None, signal="SIGKILL", stop_reason="deadline"))
    assert "was killed by SIGKILL (stop reason: deadline; cleanup complete)" in text
    assert "stdout: empty." in text and "stderr: empty." in text


def test_full_streams_show_head_and_tail_with_the_elided_byte_count_within_the_budget() -> None:
    """Two 64 KiB streams: each head and tail, exactly how many bytes are between, ≤ budget."""
    out = "H" * HEAD_BYTES + "m" * 60_000 + "T" * TAIL_BYTES
    err = "e" * 65_536
    text = summary(_evidence(out, err, truncated=True))
    assert len(text.encode()) <= BUDGET_BYTES
    assert "H" * HEAD_BYTES + "\n[… 60,000 bytes elided;" in text
    assert "…]\n" + "T" * TAIL_BYTES in text
    assert "the command wrote more, the evidence keeps the first 65,536 bytes" in text
    assert f"[… {65_536 - HEAD_BYTES - TAIL_BYTES:,} bytes elided;" in text


def test_a_cut_never_splits_a_character_and_the_count_is_in_bytes() -> None:
    """Multi-byte text is cut at character boundaries; the elided count adds up to the bytes."""
    out = "é" * 5_000  # 10,000 bytes
    text = summary(_evidence(out))
    head, marker, tail = text.split("\n")[2:5]
    assert set(head) == {"é"} and set(tail) == {"é"}
    elided = int(marker.split()[1].replace(",", ""))
    assert len(head.encode()) + elided + len(tail.encode()) == 10_000
