"""docs/cli.md says which Bun to compare with: the one jigcmd runs, with the flags it gives."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from jigcmd.command.runtime import find_runtime
from jigcmd.frontends.doctor import _runtime
from jigcmd.policy.planner import BUN_FLAGS

CLI = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
HEADING = "## Comparing with bare `bun test`"


def section() -> str:
    text = CLI.read_text(encoding="utf-8")
    start = text.index(HEADING)
    return text[start : text.index("\n## ", start + len(HEADING))]


def test_the_printed_path_is_the_bun_jigcmd_runs_and_doctor_names() -> None:
    """The docs' one-liner, run with jigcmd's Python, prints what doctor's line names."""
    (snippet,) = re.findall(r"`(python -c '[^`]+')`", section().replace("\n", " "))
    argv = shlex.split(snippet)
    env = {k: v for k, v in os.environ.items() if k != "JIGCMD_BUN"}
    printed = subprocess.run(
        [sys.executable, *argv[1:]], capture_output=True, text=True, check=True, env=env
    ).stdout.strip()
    assert os.path.realpath(printed) == os.path.realpath(find_runtime().path)
    assert "bun runtime" in section()
    assert f"at {find_runtime().path}," in _runtime().detail


def test_the_comparison_gives_bun_the_flags_every_command_gets() -> None:
    (test_line,) = re.findall(r'`"\$BUN" test ([^`]+)`', section().replace("\n", " "))
    assert tuple(test_line.split()[: len(BUN_FLAGS)]) == BUN_FLAGS
    (run_line,) = re.findall(r'`"\$BUN" (--[^`]+)`', section().replace("\n", " "))
    assert tuple(run_line.split()[: len(BUN_FLAGS)]) == BUN_FLAGS
