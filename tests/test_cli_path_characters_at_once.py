"""A path with several characters no candidate path may hold is refused naming all of them,
with a whole name to rename it to: `init`, `run --files` and a `serve` answer alike.

Before, only the first character was named and no name offered, so `données/menu é.txt`
took three tries (`é`, then the space, then the second `é`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mcp_types import TextContent

from tests.admitted_example import admit_example, jigcmd_cli
from tests.mcpsession import mcp_session
from tests.test_cli_run import CANDIDATES, lock, refusal, run

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py

_PATH = "données/menu é.txt"
_WHY = (
    "path contains 3 forbidden characters: 'é' (U+00E9) at indexes 4 and 13, ' ' (U+0020) "
    "at index 12; allowed are ASCII letters, digits, '_', '.', '/' and '-'"
)
_RENAMED = "donnees/menu-e.txt"


def _project(tmp_path: Path) -> Path:
    """The example's passing candidate with a fixture file under a non-ASCII name."""
    files = Path(shutil.copytree(CANDIDATES / "passing", tmp_path / "candidate"))
    (files / "données").mkdir()
    (files / _PATH).write_text("café\n")
    return files


def test_init_names_every_forbidden_character_and_a_whole_name(tmp_path: Path) -> None:
    """`jigcmd init` refuses the candidate with one line for the file: every character it
    may not hold, where each is, and the name to give it."""
    files = _project(tmp_path)
    done = jigcmd_cli("init", str(files))
    assert done.returncode == 2, done.stderr
    assert (
        f"  {_PATH}: {_WHY} (rule path-grammar); fix: rename it to {_RENAMED}, or leave it out "
        f"with --exclude '/{_PATH}'"
    ) in done.stderr.splitlines()


@pytest.mark.envelope
def test_run_files_names_every_forbidden_character_and_a_whole_name(
    lock: Path, tmp_path: Path
) -> None:
    """`jigcmd run --files` says the same, in its text and in `--json`'s problems."""
    files = _project(tmp_path)
    text = run(lock, tmp_path / "state", "tests", files)
    assert text.returncode == 2, text.stderr
    assert (
        f"  {_PATH}: {_WHY} (rule path-grammar); fix: rename it to {_RENAMED}, or leave it out "
        f"with --exclude '/{_PATH}'"
    ) in text.stderr.splitlines()
    done = run(lock, tmp_path / "state", "tests", files, "--json")
    (problem,) = refusal(done)["error"]["details"]["problems"]
    assert (problem["path"], problem["message"]) == (_PATH, _WHY)
    assert problem["fix"].startswith(f"rename it to {_RENAMED}, ")


@pytest.mark.envelope
async def test_serve_answers_every_forbidden_character_and_a_whole_name(tmp_path: Path) -> None:
    """An MCP call whose files hold that path is refused with the same words."""
    binding = admit_example(tmp_path)
    sent = {"test/project.test.ts": (CANDIDATES / "passing/test/project.test.ts").read_text()}
    async with mcp_session(binding, tmp_path / "state") as session:
        refused = await session.call_tool("tests", {"files": {**sent, _PATH: "café\n"}})
    assert refused.is_error is True
    (content,) = refused.content
    assert isinstance(content, TextContent)
    assert content.text == (
        f"INVALID_INPUT: /files/données~1menu é.txt: {_WHY}; rename it to {_RENAMED}"
    )
