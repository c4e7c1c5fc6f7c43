"""`serve` refused for its options answers what its peer already sent, as any failed start.

A Flow runtime writes its first call as soon as it has spawned `jigcmd serve`: a bad option
(`--root-deadline-unix-ms 12a`, a `$JIGCMD_RUN_ID` outside the grammar) is `UNAVAILABLE`
naming the problem on the wire (MCP: `-32603`), argparse's usage on stderr, status 2, as a
missing Binding is; never a bare EOF.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_FLOW_CALL = {
    "jsonrpc": "2.0",
    "id": "z1",
    "method": "capability/call",
    "params": {"operationId": "op-z", "slot": "command", "method": "run", "input": {}},
}


def _serve(
    tmp_path: Path, options: list[str], request: object, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`jigcmd serve` with the request already in its stdin when it starts."""
    argv = [sys.executable, "-m", "jigcmd", "serve", "--binding", str(tmp_path / "b.toml")]
    return subprocess.run(
        [*argv, *options],
        input=json.dumps(request) + "\n",
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("options", "env", "problem"),
    [
        (["--root-deadline-unix-ms", "12a"], {}, "argument --root-deadline-unix-ms: '12a'"),
        (["--max-envelopes", "x"], {}, "argument --max-envelopes"),
        (["--no-such-option"], {}, "unrecognized arguments: --no-such-option"),
        ([], {"JIGCMD_RUN_ID": "has space"}, "JIGCMD_RUN_ID"),
    ],
)
def test_a_refused_option_answers_the_pending_call_unavailable_naming_it(
    tmp_path: Path, options: list[str], env: dict[str, str], problem: str
) -> None:
    """One `-32000` UNAVAILABLE `jigcmd cannot serve: …` for the call; exit 2."""
    done = _serve(tmp_path, options, _FLOW_CALL, env)
    assert done.returncode == 2
    [line] = done.stdout.splitlines()
    answer = json.loads(line)
    assert answer["id"] == "z1"
    assert answer["error"]["code"] == -32000
    assert answer["error"]["data"] == {"code": "UNAVAILABLE"}
    assert answer["error"]["message"].startswith(f"jigcmd cannot serve: {problem}")
    if options:
        assert done.stderr.startswith("usage: jigcmd")


def test_an_mcp_request_is_answered_internal_error_as_a_failed_start_answers_it(
    tmp_path: Path,
) -> None:
    """MCP's words for a server that cannot start: -32603 naming the option."""
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    done = _serve(tmp_path, ["--result-budget", "1"], request)
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert error["code"] == -32603
    assert error["message"].startswith("Internal error: jigcmd cannot serve: argument")
