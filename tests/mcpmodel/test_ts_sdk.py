"""What a model reads, through the TypeScript SDK (`@modelcontextprotocol/sdk`) as well.

The SDK comes from npm into a cache the tests manage (`tests/npmtools.py`): a skip naming
the reason without node/npm, a failure under CI (`.ci/run` installs them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.protocol.mcp_view import DEFAULT_BUDGET_BYTES
from tests.mcpmodel.fixtures import admit
from tests.npmtools import TS_SDK, node_package

pytestmark = pytest.mark.envelope

_SCRIPT = Path(__file__).parents[1] / "npm" / "ts_sdk_model.mjs"


def test_the_typescript_sdk_reads_a_budgeted_result_its_stream_and_progress(
    tmp_path: Path,
) -> None:
    binding = admit(tmp_path)
    prefix = node_package(TS_SDK)
    serve = [sys.executable, "-m", "jigcmd", "serve", "--binding", str(binding)]
    done = subprocess.run(
        ["node", str(_SCRIPT), *serve, "--state-dir", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        env={**os.environ, "JIGCMD_TS_SDK_PREFIX": str(prefix)},
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["isError"] is False
    assert seen["structuredBytes"] <= DEFAULT_BUDGET_BYTES
    assert seen["totalBytes"] <= DEFAULT_BUDGET_BYTES
    assert seen["budget"] == DEFAULT_BUDGET_BYTES
    assert (seen["captured"], seen["readLength"]) == (65_536, 65_536)
    assert seen["readSha256"] == seen["sha256"]
    assert seen["links"][:2] == ["stdout", "stderr"]
    assert seen["tickedError"] is False
    ticks = [p for p in seen["progress"] if str(p.get("message", "")).startswith("output: tick ")]
    assert len(ticks) >= 3, seen["progress"]
    assert all(p["total"] >= p["progress"] for p in seen["progress"] if "total" in p)
