"""`jigcmd serve` makes its journal's AIO sync context when it starts, not at the first run.

`fs.aio-max-nr` is one count for the whole host: a context left to the first run's sync is
lost (syncs in place for the server's life) when another host process holds the rest of the
count by then. The kernel maps each context's completion ring as `/[aio]`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.admitted_example import admit_example
from tests.syncfaults import require_aio

pytestmark = pytest.mark.envelope

_PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


def _aio_rings(pid: int) -> list[str]:
    """The AIO completion rings mapped in process `pid`."""
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return [line for line in maps if line.endswith("/[aio] (deleted)")]


def test_a_serving_server_holds_its_sync_context_before_any_run(tmp_path: Path) -> None:
    """Once serve answers its first request (no run yet), its journal's context exists."""
    require_aio()
    binding = admit_example(tmp_path)
    serve = subprocess.Popen(
        [
            sys.executable, "-m", "jigcmd", "serve", "--binding", str(binding),
            "--state-dir", str(tmp_path / "state"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert serve.stdin is not None and serve.stdout is not None
    try:
        serve.stdin.write(_PING)
        serve.stdin.flush()
        # The answer comes only once the service (its journal among it) is open.
        assert b'"id":1' in serve.stdout.readline()
        rings = _aio_rings(serve.pid)
    finally:
        _, stderr = serve.communicate(timeout=120)
    assert serve.returncode == 0, stderr
    assert len(rings) == 1, rings
