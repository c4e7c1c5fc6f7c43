"""docs/cli.md says which Bun to compare with: the one jigcmd runs, with the flags it gives."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from jigcmd.command.runtime import find_runtime
from jigcmd.frontends.doctor import _runtime
from jigcmd.policy.planner import BUN_ENV, BUN_FLAGS, BUN_TEST_ENV

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


def recipe() -> list[list[str]]:
    """The comparison's commands (its `sh` block, lines joined, comments dropped), as argv."""
    (block,) = re.findall(r"```sh\n(.*?)```", section(), re.DOTALL)
    joined = block.replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if not line.startswith("#")]


def _environment(*, test: bool) -> list[str]:
    """`env -i` and what the envelope sets for a test or a run command (policy.planner's
    BUN_ENV, and BUN_TEST_ENV for a test), then TZ=UTC for its UTC."""
    sets = BUN_ENV + BUN_TEST_ENV if test else BUN_ENV
    return ["env", "-i", *(f"{name}={value}" for name, value in sets), "TZ=UTC", "$BUN"]


def test_the_comparison_gives_bun_the_flags_and_environment_every_command_gets() -> None:
    """A test command and a run command: `env -i`, the envelope's variables, Bun's flags."""
    test_argv, run_argv = recipe()
    test_start, run_start = _environment(test=True), _environment(test=False)
    assert test_argv[: len(test_start)] == test_start
    assert run_argv[: len(run_start)] == run_start
    assert tuple(test_argv[len(test_start) :][: len(BUN_FLAGS) + 1]) == ("test", *BUN_FLAGS)
    assert tuple(run_argv[len(run_start) :][: len(BUN_FLAGS)]) == BUN_FLAGS


def test_the_comparisons_test_sees_the_envelopes_environment_and_utc(tmp_path: Path) -> None:
    """Run as written, from a caller with its own TZ and HOME: only BUN_ENV, BUN_TEST_ENV,
    NODE_ENV and TZ."""
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "a.test.ts").write_text(
        'import { test } from "bun:test";\n'
        "test('env', () => console.log(JSON.stringify({ env: process.env,\n"
        "  zone: Intl.DateTimeFormat().resolvedOptions().timeZone })));\n"
    )
    test_argv = recipe()[0]
    argv = [find_runtime().path if arg == "$BUN" else arg for arg in test_argv]
    caller = {**os.environ, "TZ": "America/New_York", "HOME": str(tmp_path)}
    done = subprocess.run(
        argv, cwd=tmp_path, env=caller, capture_output=True, text=True, timeout=60, check=True
    )
    (printed,) = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert json.loads(printed) == {
        "env": {**dict(BUN_ENV + BUN_TEST_ENV), "NODE_ENV": "test", "TZ": "UTC"},
        "zone": "UTC",
    }
