"""Hosts' own clients from npm against the real `jigcmd serve`: MCP Inspector 2.12's CLI in
every protocol era (in 2026-07-28 it calls tools as tasks), and the TypeScript SDK v2 client
in each negotiation mode.

The packages are installed by `tests/npmtools.py` into a cache it manages; without node/npm
(or the registry) these are skips naming the reason, failures under `CI=true`.
`@hasmcp/mcp-spec-test` is not tested: the registry has no such package (npm 404).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.frontends.runs import list_runs
from tests.admitted_example import admit_example
from tests.npmtools import INSPECTOR, TS_CLIENT, node_package

pytestmark = pytest.mark.envelope

_SCRIPT = Path(__file__).parent / "npm" / "ts_client.mjs"


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    """The example, admitted in a temporary copy."""
    return admit_example(tmp_path)


def _serve(binding: Path, state: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "jigcmd",
        "serve",
        "--binding",
        str(binding),
        "--state-dir",
        str(state),
    ]


@pytest.mark.parametrize("era", ["modern", "auto", "legacy"])
def test_inspector_cli_lists_and_calls_in_every_era(
    binding: Path, tmp_path: Path, era: str
) -> None:
    prefix = node_package(INSPECTOR)
    inspector = prefix / "node_modules" / ".bin" / "mcp-inspector"
    state = tmp_path / "state"
    # The Inspector keeps a catalogue under $HOME: a test's own, not the user's.
    env = {**os.environ, "HOME": str(tmp_path / "home")}

    def inspect(*method: str) -> dict[str, object]:
        done = subprocess.run(
            [
                str(inspector),
                "--cli",
                "--protocol-era",
                era,
                "--format",
                "json",
                "-q",
                *method,
                *_serve(binding, state),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        answer = json.loads(done.stdout)
        assert isinstance(answer, dict)
        return answer

    listed = inspect("--method", "tools/list")["result"]
    assert isinstance(listed, dict)
    assert [tool["name"] for tool in listed["tools"]] == ["tests", "cli"]
    arguments = {
        "files": {"src/cli.ts": 'console.log("inspected " + process.argv[2]);\n'},
        "args": [era],
    }
    called = inspect(
        "--method", "tools/call", "--tool-name", "cli", "--tool-args-json", json.dumps(arguments)
    )
    result = called["result"]
    assert isinstance(result, dict)
    assert result["isError"] is False
    assert result["structuredContent"]["stdout"]["head"] == f"inspected {era}\n"
    modern = era != "legacy"
    assert (result.get("resultType") == "complete") is modern
    assert ("dev.jigcmd/report" in result["_meta"]) is modern
    (row,) = list_runs(state)
    assert row.state == "done"
    # The Inspector declares the Tasks extension in 2026-07-28: the call ran as a task, its
    # CreateTaskResult polled with tasks/get to the result above.
    assert row.operation_id.startswith("task-") is modern


@pytest.mark.parametrize(
    ("mode", "version"), [("pin", "2026-07-28"), ("auto", "2026-07-28"), ("legacy", "2025-11-25")]
)
def test_the_typescript_sdk_v2_client_connects_lists_calls_four_and_reads_links(
    binding: Path, tmp_path: Path, mode: str, version: str
) -> None:
    prefix = node_package(TS_CLIENT)
    done = subprocess.run(
        ["node", str(_SCRIPT), mode, *_serve(binding, tmp_path / "state")],
        capture_output=True,
        text=True,
        env={**os.environ, "JIGCMD_TS_SDK_PREFIX": str(prefix)},
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["version"] == version
    assert summary["tools"] == ["tests", "cli"]
    assert summary["outputs"] == [f"ts t{n}\n" for n in range(1, 5)]
    assert summary["errors"] == [False] * 4
    # Every link of a result opens, in each era: a 2026-07-28 read carries `ttlMs` and
    # `cacheScope`, without which the SDK throws "Invalid result for resources/read".
    assert [name for name, _ in summary["reads"]] == ["stdout", "stderr", "attestation"]
    assert summary["reads"][0][1] == len("ts t1\n")
    assert summary["templates"] == ["jigcmd://run/{run}/{operation}/{name}"]
    assert summary["listed"] == 0
