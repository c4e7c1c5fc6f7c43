"""The README's jarvis section, as written: the `curl` recipe and the python-utcp client.

Both drive a real `jigcmd jarvis` child with the README's example policy, in a fresh HOME and
state directory; the only change to the README's text is the port (7777 may be taken on a
shared machine).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.jarvis.jarvis_harness import TOKEN
from tests.optional import require_tools
from tests.required import require_root

pytestmark = pytest.mark.envelope

REPO = Path(__file__).resolve().parents[2]
SECTION = "## jarvis: commands over loopback HTTP"


def block(language: str) -> str:
    """The first fenced block of `language` in the README's jarvis section."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n## ", len(SECTION))]
    fence = f"```{language}\n"
    start = section.index(fence) + len(fence)
    return section[start : section.index("```", start)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A fresh HOME and state directory; the venv's jigcmd first on PATH."""
    require_root()
    bindir = Path(sys.executable).parent
    return {
        **os.environ,
        "HOME": str(tmp_path),
        "JIGCMD_STATE_DIR": str(tmp_path / "state"),
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def test_the_curl_recipe_runs_as_written(env: dict[str, str], tmp_path: Path) -> None:
    """The manual, an allowed run's output and its stored record, each from one curl.

    Run from a directory of the user's, not the checkout: the recipe's paths must hold for
    an installed jigcmd too.
    """
    require_tools("curl", what="the README's jarvis recipe")
    port = str(free_port())
    script = "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n" + block("sh").replace("7777", port)
    child = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    assert child.returncode == 0, out + err
    assert '"utcp_version"' in out and '"jarvis.run.create"' in out
    assert '"status":"exited","exit_code":0' in out
    assert '"stdout":{"text":"hello\\n"' in out
    assert '"argv":["echo","hello"]' in out  # the stored record from jarvis.run.get
    # The answer the README shows: each part between its `…` is in the real one, in order.
    shown = block("sh").split('echo "$run"   # ', 1)[1].split("\n", 1)[0]
    place = 0
    for part in filter(None, shown.split("…")):
        found = out.find(part, place)
        assert found >= 0, f"the README shows {part!r}, not in {out[place : place + 300]!r}"
        place = found + len(part)


@pytest.fixture
def jarvis(env: dict[str, str], tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """`jigcmd jarvis` as the README starts it, on a free port; stopped afterwards."""
    port = free_port()
    env = {**env, "JARVIS_BEARER_TOKEN": TOKEN}
    policy = REPO / "jigcmd" / "jarvis" / "example-policy.toml"
    jigcmd = shutil.which("jigcmd", path=env["PATH"])
    assert jigcmd is not None
    log = tmp_path / "jarvis.log"
    with log.open("wb") as stderr:
        child = subprocess.Popen(
            [jigcmd, "jarvis", "--policy", str(policy), "--port", str(port)],
            env=env, stdout=subprocess.DEVNULL, stderr=stderr,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/utcp", headers={"Authorization": f"Bearer {TOKEN}"})
                break
            except httpx.TransportError:
                assert child.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)  # polled: the manual answering is what "listening" means
        yield base, env
    finally:
        child.terminate()
        child.wait(timeout=30)


async def test_the_utcp_client_runs_as_written(
    jarvis: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's python block registers the manual and runs `echo hi` through jarvis."""
    base, env = jarvis
    monkeypatch.setenv("JARVIS_BEARER_TOKEN", env["JARVIS_BEARER_TOKEN"])
    code = block("python").replace("http://127.0.0.1:7777", base)
    source = "async def readme() -> None:\n" + textwrap.indent(code, "    ")
    scope: dict[str, object] = {}
    exec(compile(source, "README.md", "exec"), scope)
    await scope["readme"]()  # type: ignore[operator]
    async with httpx.AsyncClient() as client:
        got = await client.post(
            f"{base}/tools/jarvis.run.get",
            json={"tool": "jarvis.run.get", "args": {"run_id": 1}},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
    record = got.json()
    assert record["argv"] == ["echo", "hi"], record
    assert record["exit_code"] == 0 and record["stdout"]["text"] == "hi\n", record
