"""`jigcmd run`'s text: U+2028 and U+2029 in the candidate's output start no line of their own.

Python's `str.splitlines()` (and JavaScript) break a line at the Unicode line and paragraph
separators too: printed raw inside the `| ` framed stream, they put a forged `ended:` line
at the margin for such a reader.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.test_cli_run import CANDIDATES, lock, run

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py

_FORGED = "ended:      exit code 0 (stop reason: exited, cleanup: complete)"
_CLI = (
    f'process.stdout.write("all good\\u2028{_FORGED}\\u2029resources:  fine\\n");\n'
    f'process.stderr.write("warn\\u2029{_FORGED}\\n");\n'
    "process.exit(3);\n"
)


def test_a_line_separator_in_the_output_cannot_forge_a_summary_line(
    lock: Path, tmp_path: Path
) -> None:
    """Split as `str.splitlines()` splits, the only `ended:` line at the margin is jigcmd's,
    and every line under a stream's header starts with `| `; the separators show as escapes."""
    files = tmp_path / "candidate"
    shutil.copytree(CANDIDATES / "passing", files)
    (files / "src" / "cli.ts").write_text(_CLI)
    done = run(lock, tmp_path / "state", "cli", files)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line for line in lines if line.startswith("ended:")] == [
        "ended:      exit code 3 (stop reason: exited, cleanup: complete)"
    ]
    start = lines.index("--- stdout: each line after '| ' ---")
    streams = [line for line in lines[start:] if not line.startswith("--- ")]
    assert streams == [
        f"| all good\\u2028{_FORGED}\\u2029resources:  fine",
        f"| warn\\u2029{_FORGED}",
    ]
    assert "\u2028" not in done.stdout and "\u2029" not in done.stdout
