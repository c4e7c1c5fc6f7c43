"""The real `jigcmd jarvis`: every answered refusal of a head h11 refused, its token valid, is
an audit row or counted in a summary row, even when jarvis is stopped mid-flood.

Each head carries the token and an illegal header line; 20 threads send them, each on a
connection of its own, and count the 400s read. SIGTERM follows at once.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

from tests.jarvis.edge_wire import ANSWER_S
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import TOKEN

_OUTCOME = "refused: malformed request: illegal header line"
_SUMMARY = re.compile(r"^refused (\d+) more requests? before the application")
_THREADS, _EACH = 20, 150


def _flood(port: int) -> int:
    """How many refused heads were answered 400."""
    head = (
        f"GET /tools/jarvis.run.read HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nBad Header: x\r\n\r\n"
    ).encode()
    answered = [0] * _THREADS

    def send(index: int) -> None:
        for _ in range(_EACH):
            with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_S) as sock:
                sock.sendall(head)
                if sock.recv(4096).startswith(b"HTTP/1.1 400 "):
                    answered[index] += 1

    threads = [threading.Thread(target=send, args=(i,)) for i in range(_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(answered)


def _audit(jarvis: JarvisChild) -> list[dict[str, str]]:
    """Every row `jigcmd jarvis-audit` prints of the child's state directory."""
    where = ("--state-dir", str(jarvis.state_dir), "--limit", "100000")
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "jarvis-audit", *where],
        capture_output=True, text=True, timeout=60, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_flood_of_refused_heads_then_sigterm_leaves_every_refusal_accounted(
    tmp_path: Path,
) -> None:
    machine_runs_jarvis()
    with JarvisChild(tmp_path) as jarvis:
        answered = _flood(jarvis.port)
        jarvis.signal(signal.SIGTERM)
        assert jarvis.wait() == 0, jarvis.stderr()
        rows = _audit(jarvis)
    own = [row for row in rows if row["actor"] != "unauthenticated"]
    written = sum(row["outcome"] == _OUTCOME for row in own)
    counted = sum(int(m.group(1)) for row in own if (m := _SUMMARY.match(row["outcome"])))
    assert answered == _THREADS * _EACH
    assert written + counted == answered, (written, counted, jarvis.stderr())
