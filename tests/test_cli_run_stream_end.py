"""`jigcmd run` shows a stream past its 64 KiB cap: how many bytes were not kept and the
stream's end (where Bun's footer is), in the text and as `output` in `--json`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from jigcmd.evidence import OUTPUT_CAP_BYTES
from tests.test_cli_run import CANDIDATES, answer, jigcmd_cli, lock, run

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py

# `cli` prints N letters and a last line, the footer a person looks for.
_NOISY = (
    'await Bun.write(Bun.stdout, "a".repeat(Number(process.argv[2])) + "\\nTHE-END\\n");\n'
    'if (process.argv[3] === "hang") await Bun.sleep(600_000);\n'
)


def _noisy(tmp_path: Path) -> Path:
    files = tmp_path / "candidate"
    shutil.copytree(CANDIDATES / "passing", files)
    (files / "src" / "cli.ts").write_text(_NOISY)
    return files


def test_a_stream_a_little_past_the_cap_is_shown_whole(lock: Path, tmp_path: Path) -> None:
    """473 bytes past the cap: the text says so and shows them, ending in the footer; in
    `--json` the kept text and `output.stdout.tail` are the whole stream."""
    files = _noisy(tmp_path)
    letters = OUTPUT_CAP_BYTES + 464
    whole = "a" * letters + "\nTHE-END\n"
    done = run(lock, tmp_path / "state", "cli", files, "--", str(letters))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "--- stdout, truncated, its first 65,536 bytes: each line after '| ' ---" in lines
    after = lines.index("--- stdout, the 473 bytes after them: each line after '| ' ---")
    assert lines[after + 1 :][:2] == ["| " + "a" * 464, "| THE-END"]
    json_done = run(lock, tmp_path / "state", "cli", files, "--json", "--", str(letters))
    found = answer(json_done)
    stdout = found["evidence"]["stdout"]
    assert stdout["truncated"] is True
    assert found["output"]["stdout"] == {
        "droppedBytes": 473, "tail": whole[OUTPUT_CAP_BYTES:], "tailBytes": 473,
    }  # fmt: skip
    assert stdout["text"] + found["output"]["stdout"]["tail"] == whole
    assert found["output"]["stderr"] == {"droppedBytes": 0, "tail": "", "tailBytes": 0}
    # Beside the evidence, not signed: `verify` says so, and holds the rest of the answer.
    (tmp_path / "answer.json").write_text(json_done.stdout)
    state = str(tmp_path / "state")
    verified = jigcmd_cli("verify", str(tmp_path / "answer.json"), "--state-dir", state)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "output" in verified.stdout and "not signed" in verified.stdout


def test_a_stream_far_past_the_cap_says_what_is_not_kept_and_ends(
    lock: Path, tmp_path: Path
) -> None:
    """200,000 letters: the bytes neither kept nor in the tail are counted, and the last
    4 KiB shown, the footer among them."""
    files = _noisy(tmp_path)
    done = run(lock, tmp_path / "state", "cli", files, "--", "200000")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    dropped = 200_000 + len("\nTHE-END\n") - OUTPUT_CAP_BYTES
    assert (
        f"--- stdout, {dropped - 4096:,} bytes after them not kept, then its last 4,096 bytes: "
        "each line after '| ' ---"
    ) in lines
    assert lines[-3:] == [
        "| THE-END",
        "--- stderr: each line after '| ' ---",
        "--- end of output ---",
    ]


def test_a_run_stopped_at_its_deadline_shows_its_streams_end_too(
    lock: Path, tmp_path: Path
) -> None:
    """The text a deadline prints (status 4) keeps the count and the tail, and `--json`
    beside the error's evidence carries `output`."""
    files = _noisy(tmp_path)
    done = run(lock, tmp_path / "state", "cli", files, "--timeout", "2", "--", "200000", "hang")
    assert done.returncode == 4, done.stderr
    assert "| THE-END" in done.stdout.splitlines()
    json_done = run(
        lock, tmp_path / "state", "cli", files, "--json", "--timeout", "2", "--", "200000", "hang"
    )
    found = answer(json_done)
    assert found["error"]["code"] == "DEADLINE_EXCEEDED"
    assert found["output"]["stdout"]["droppedBytes"] == 200_000 + 9 - OUTPUT_CAP_BYTES
    assert found["output"]["stdout"]["tail"].endswith("a\nTHE-END\n")
