"""The README's first calls, run exactly as written, and the request files they pipe.

A person following the README copies the bundled example to a directory of their own, locks
it, runs each command once and pipes the request files into `jigcmd serve`; every step must
answer, and nothing may land in the checkout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.required import require_root

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
HEADING = "## Your first calls: the bundled example"


def _generator() -> ModuleType:
    """Import scripts/gen_example_requests.py, which is not part of the package."""
    spec = importlib.util.spec_from_file_location(
        "gen_example_requests", REPO / "scripts" / "gen_example_requests.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def section_blocks(heading: str) -> list[str]:
    """Every shell block of one README section, in order, as written."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    section = section[: section.index("\n## ", len(heading))]
    return [block[: block.index("```")] for block in section.split("```sh\n")[1:]]


def recipe() -> str:
    """The first calls' shell block, as written."""
    (block,) = section_blocks(HEADING)
    return block


def attestation() -> str:
    """The reviewer's shell block ("Evidence a reviewer can check"), as written."""
    (block,) = section_blocks("## Evidence a reviewer can check")
    return block


def test_the_request_files_carry_the_example_candidates_as_they_are() -> None:
    """jigcmd/example/requests/ is what scripts/gen_example_requests.py makes of the candidates."""
    assert _generator().stale_files() == [], "run scripts/gen_example_requests.py"


def _untracked() -> set[str] | None:
    """Files in the checkout git neither tracks nor ignores (None outside a git checkout)."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=all"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return {line[3:] for line in listed.stdout.splitlines() if line.startswith("??")}


def _answers(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith('{"jsonrpc"')]


@pytest.mark.envelope
def test_the_readme_recipe_runs_as_written_and_every_request_is_answered(
    tmp_path: Path,
) -> None:
    """Lock, four runs and two piped sessions, in a fresh HOME; then the reviewer's block
    after them, in the same shell: its statement verified against the answer it kept."""
    require_root()
    bindir = Path(sys.executable).parent
    assert (bindir / "jigcmd").exists(), f"no jigcmd beside {sys.executable}"
    before = _untracked()
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        # Its own journal: the machine's default one may belong to another jigcmd version.
        "JIGCMD_STATE_DIR": str(tmp_path / "state"),
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", recipe() + attestation()],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    copy = tmp_path / "jigcmd-example"
    assert f"admitted: wrote {copy / 'jigcmd.lock'}" in out
    assert (copy / "jigcmd.lock").is_file()
    assert (copy / "passing.intoto.jsonl").is_file()
    assert out.endswith(
        "ok   ending: command, invocation, stdin and how it ended match\nverified\n"
    )
    assert not (REPO / "jigcmd" / "example" / "jigcmd.lock").exists()
    assert _untracked() == before
    # The summaries: passing, failing, the cli with its arguments and stdin.
    ended = [line for line in out.splitlines() if line.startswith("ended:")]
    assert ended == [
        "ended:      exit code 0 (stop reason: exited, cleanup: complete)",
        "ended:      exit code 1 (stop reason: exited, cleanup: complete)",
        "ended:      exit code 0 (stop reason: exited, cleanup: complete)",
    ]
    assert '{"args":["--greeting","hi"],"records":["a","b"]}' in out
    hostile = json.loads(next(line for line in out.splitlines() if line.startswith('{"evidence"')))
    assert hostile["evidence"]["exitCode"] == 0
    assert "ESCAPED" not in hostile["evidence"]["stderr"]["text"]
    assert set(hostile["report"]) >= {"wallMs", "peakMemoryBytes"}
    # Every request of the two files answered once, the Flow call with its evidence.
    requests = [
        json.loads(line)
        for name in ("flow.jsonl", "mcp.jsonl")
        for line in (copy / "requests" / name).read_text().splitlines()
    ]
    asked = [r["id"] for r in requests if "id" in r]
    answers = {a["id"]: a for a in _answers(out)}
    assert sorted(map(str, answers)) == sorted(map(str, asked)), out
    assert answers["example-1"]["result"]["value"]["exitCode"] == 0
    assert answers[1]["result"]["serverInfo"]["name"] == "jigcmd"
    assert [t["name"] for t in answers[2]["result"]["tools"]] == ["tests", "cli"]
    # The three tools/call, side by side: passing, failing, the cli with args and stdin.
    called = {i: answers[i]["result"] for i in (3, 4, 5)}
    assert all(result["isError"] is False for result in called.values()), called
    assert [called[i]["structuredContent"]["exitCode"] for i in (3, 4, 5)] == [0, 1, 0]
    records = json.loads(called[5]["structuredContent"]["stdout"]["head"])
    assert records == {"args": ["--greeting", "hi"], "records": ["a", "b"]}
