"""The operator's own `--files` path is shown whole by `jigcmd run`, however long it is.

The 1,024-character bound on an error's details is for the wire, where a peer's text is
quoted; `jigcmd run --json`'s `error.details.path` and the stderr head line built from it
name the directory the operator typed, every character of it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.test_cli_run import CANDIDATES, answer, lock, run

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py


def test_a_files_path_over_1024_characters_is_named_whole(lock: Path, tmp_path: Path) -> None:
    """A refused candidate 1,200+ characters deep: its path in details and on stderr, whole."""
    files = tmp_path.joinpath(*[f"{n}" + "d" * 199 for n in range(6)], "candidate")
    assert len(str(files)) > 1224
    shutil.copytree(CANDIDATES / "passing", files)
    (files / "src" / "a b.ts").write_text("export {}\n")
    done = run(lock, tmp_path / "state", "tests", files, "--json")
    assert done.returncode == 2
    # The message is bounded as every error's is (it may be cut); the details are not.
    details = answer(done)["error"]["details"]
    assert details["path"] == str(files)
    assert "pathChars" not in details
    head = f"jigcmd run: INVALID_INPUT: --files {files}: 1 problem, nothing ran:"
    assert head in done.stderr.splitlines()
