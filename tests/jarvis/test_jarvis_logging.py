"""`jigcmd -v jarvis` keeps its own log lines once uvicorn serves (uvicorn leaves logging alone)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import TOKEN

# A failsafe for the line to reach the stderr file (written by a thread), never a timing claim.
LINE_S = 30.0
CUT_SHORT = "POST /tools/jarvis.run.create: connection closed before the request body was complete"


def test_a_body_cut_short_is_logged_on_stderr_after_the_server_started(tmp_path: Path) -> None:
    """The info line docs/jarvis.md promises for a body cut short reaches stderr under -v."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path, ["-v"]) as jarvis:
        with socket.create_connection(("127.0.0.1", jarvis.port)) as sock:
            sock.sendall(
                (
                    f"POST /tools/jarvis.run.create HTTP/1.1\r\nHost: 127.0.0.1:{jarvis.port}\r\n"
                    f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                    'Content-Length: 100\r\n\r\n{"tool":'
                ).encode()
            )
        deadline = time.monotonic() + LINE_S
        while CUT_SHORT not in jarvis.stderr():
            assert time.monotonic() < deadline, jarvis.stderr()
            time.sleep(0.05)
    assert f"jigcmd: INFO jigcmd.jarvis: {CUT_SHORT}" in jarvis.stderr()
