"""docs/deployment.md's `podman run … jigcmd serve` and its `mcpServers` entry, as written.

Each is run with only the reader's substitutions: the image (built locally from this
checkout, `kubeimage.py`), the project (the bundled example, admitted), a fresh state volume
and run id, and the runc/ulimit options the note above the block names for a host like this
one. The `serve` command gets a FLOW Run/1 call and must run it; the MCP host's command gets
an `initialize` and must answer it. Image and volumes are removed afterwards.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.admitted_example import admit_example
from tests.container.kubeimage import ROOT, build_image
from tests.container.test_container import engine, require_engine, rlimits

pytestmark = [pytest.mark.envelope, pytest.mark.slow]

DEPLOYMENT = ROOT / "docs" / "deployment.md"
SECONDS = 300.0
_SH = re.compile(r"```sh\n(.*?)```", re.S)
_JSON = re.compile(r"```json\n(.*?)```", re.S)
_CALL = {
    "operationId": "jigcmd-documented-1",
    "slot": "command",
    "method": "run",
    "input": {"command": "cli", "files": {"src/cli.ts": 'console.log("documented");\n'}},
}


def documented_serve() -> list[str]:
    """The doc's shell command that runs `jigcmd serve`, as a shell splits it."""
    (command,) = [
        joined
        for block in _SH.findall(DEPLOYMENT.read_text())
        if "jigcmd serve --binding /srv/binding.toml" in (joined := block.replace("\\\n", " "))
        and "…" not in joined
    ]
    return shlex.split(command)


def make_host_ids_directory() -> None:
    """The doc's step before any of its containers: the host's /run/jigcmd, which they bind."""
    (step,) = {
        line.split("#")[0].strip()
        for block in _SH.findall(DEPLOYMENT.read_text())
        for line in block.splitlines()
        if line.startswith("install -d") and line.split("#")[0].strip().endswith(" /run/jigcmd")
    }
    subprocess.run(shlex.split(step), check=True, timeout=60)


def documented_mcp_server() -> dict[str, Any]:
    """The doc's `mcpServers` entry."""
    (entry,) = [
        json.loads(block)["mcpServers"]["jigcmd"]
        for block in _JSON.findall(DEPLOYMENT.read_text())
        if "mcpServers" in block
    ]
    return entry  # type: ignore[no-any-return]


@pytest.fixture
def image() -> Iterator[str]:
    """This checkout's image, under a fresh tag; removed afterwards."""
    require_engine()
    name = f"localhost/jigcmd-test-serve:{uuid.uuid4().hex[:8]}"
    try:
        build_image(["podman"], name)
        yield name
    finally:
        subprocess.run(["podman", "rmi", "-f", name], capture_output=True, check=False)


@pytest.fixture
def volume() -> Iterator[str]:
    """A fresh state volume's name; removed afterwards."""
    require_engine()
    name = f"jigcmd-test-state-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["podman", "volume", "rm", "-f", name], capture_output=True, check=False)


def _substituted(argv: list[str], image: str, project: Path, volume: str) -> list[str]:
    """The reader's substitutions, and this host's runtime options after `run`."""
    whole = {"IMAGE": image, "localhost/jigcmd:0.1.0": image, "RUN": "jigcmd-doc"}
    out = []
    for word in argv:
        replaced = word.replace("$PWD", str(project)).replace("/home/me/project", str(project))
        replaced = replaced.replace("jigcmd-state:", f"{volume}:")
        out.append(whole.get(replaced, replaced))
    at = out.index("run")
    return [*engine()[:1], *out[1 : at + 1], *engine()[2:], *rlimits(), *out[at + 1 :]]


def _talk(argv: list[str], requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    lines = "".join(json.dumps(request) + "\n" for request in requests)
    done = subprocess.run(
        argv, input=lines, capture_output=True, text=True, timeout=SECONDS, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_documented_serve_command_runs_a_call(tmp_path: Path, image: str, volume: str) -> None:
    """Requests piped into the doc's command: the call runs and is answered."""
    project = admit_example(tmp_path).parent
    make_host_ids_directory()
    argv = documented_serve()
    assert argv[:3] == ["podman", "run", "-i"], argv
    request = {"jsonrpc": "2.0", "id": "doc-1", "method": "capability/call", "params": _CALL}
    (answer,) = _talk(_substituted(argv, image, project, volume), [request])
    assert "result" in answer, answer
    assert "documented" in json.dumps(answer["result"]), answer


def test_the_documented_mcp_server_entry_answers_initialize(
    tmp_path: Path, image: str, volume: str
) -> None:
    """An MCP host's spawn of the doc's entry: `initialize` is answered."""
    project = admit_example(tmp_path).parent
    make_host_ids_directory()
    entry = documented_mcp_server()
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "jigcmd-test", "version": "1"},
        },
    }
    argv = _substituted([entry["command"], *entry["args"]], image, project, volume)
    (answer,) = _talk(argv, [initialize])
    assert answer["result"]["serverInfo"]["name"] == "jigcmd", answer
