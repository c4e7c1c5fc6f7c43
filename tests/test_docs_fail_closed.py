"""What README.md and docs/security.md say a machine that cannot contain a run answers is
what `jigcmd run` answers: a start it cannot make is `UNAVAILABLE`, never `EXECUTION_FAILED`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jigcmd

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = Path(jigcmd.__file__).parent / "example"


def _fail_closed_paragraph(page: Path) -> str:
    """The paragraph of `page` that says what a machine without the envelope answers."""
    paragraphs = page.read_text(encoding="utf-8").split("\n\n")
    (said,) = [p for p in paragraphs if "refuse to start" in p or "fails the start" in p]
    return said


def test_a_start_jigcmd_cannot_make_is_unavailable_as_the_docs_say(tmp_path: Path) -> None:
    """A state directory that is a file: status 3, `UNAVAILABLE`; both pages name that code
    for a failed start and `EXECUTION_FAILED` for an envelope piece."""
    afile = tmp_path / "afile"
    afile.write_text("")
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "run", "--binding", str(EXAMPLE / "binding.toml"),
         "--state-dir", str(afile), "tests", "--files", str(EXAMPLE / "candidates" / "passing"),
         "--json"],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "UNAVAILABLE"
    for page in (REPO / "README.md", REPO / "docs" / "security.md"):
        said = _fail_closed_paragraph(page)
        assert "`UNAVAILABLE`" in said and "`EXECUTION_FAILED`" in said, page
        assert said.index("`UNAVAILABLE`") < said.index("`EXECUTION_FAILED`"), page
