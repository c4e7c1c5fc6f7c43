"""`jigcmd run` reads package.json as Bun does (comments, trailing commas), and names one it
cannot read instead of taking it for `{}`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.test_cli_run import CANDIDATES, lock, run

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py


def _with_manifest(tmp_path: Path, manifest: str) -> Path:
    files = tmp_path / "candidate"
    shutil.copytree(CANDIDATES / "passing", files)
    (files / "package.json").write_text(manifest)
    (files / "src" / "pad.ts").write_text('import pad from "tiny-pad";\nexport default pad;\n')
    return files


def test_run_reads_a_package_json_with_a_comment_and_a_trailing_comma(
    lock: Path, tmp_path: Path
) -> None:
    """The dependency note is said, as for the same file in strict JSON."""
    files = _with_manifest(
        tmp_path, '{\n  // padding\n  "name": "pad",\n  "dependencies": {"tiny-pad": "^1",},\n}\n'
    )
    done = run(lock, tmp_path / "state", "cli", files)
    assert done.returncode == 0, done.stderr
    assert "package.json declares 1 dependency (tiny-pad: src/pad.ts) that" in done.stderr
    assert "not read" not in done.stderr


def test_run_names_a_package_json_it_cannot_read(lock: Path, tmp_path: Path) -> None:
    """One line names the file and why, before the run."""
    files = _with_manifest(tmp_path, '["not", "an object"]\n')
    done = run(lock, tmp_path / "state", "cli", files)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "is not read" in line]
    assert said == [
        f"jigcmd run: --files {files}: package.json is not read: it holds an array, not an "
        "object; no entry point, workspace or dependency is taken from it"
    ]
