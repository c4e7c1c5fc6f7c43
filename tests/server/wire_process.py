"""Test helper: the fake-backend server as a real child process, driven over pipes."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

REPO = Path(__file__).parents[2]
FAKE_SERVER = REPO / "tests" / "protocol" / "fake_server.py"
# A failsafe so a broken server fails the test instead of hanging it; never a timing assertion.
FAILSAFE_S = 20.0


def server_env() -> dict[str, str]:
    """The environment that lets the child import jigcmd from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


class ServerProcess:
    """A running fake server; stdout lines are collected by a thread."""

    def __init__(self, protocol: str = "auto") -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(FAKE_SERVER), protocol],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=server_env(),
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        self.stderr = b""
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def _pump_stderr(self) -> None:
        assert self.process.stderr is not None
        self.stderr = self.process.stderr.read()

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send_json(self, message: object) -> None:
        self.send(json.dumps(message).encode() + b"\n")

    def read_line(self) -> bytes:
        """The next raw stdout line (b"" at EOF)."""
        return self._lines.get(timeout=FAILSAFE_S)

    def read(self) -> dict[str, Any]:
        line = self.read_line()
        assert line.endswith(b"\n"), line
        message: dict[str, Any] = json.loads(line)
        return message

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send_json(message)
        return self.read()

    def close_stdin(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    def wait(self) -> int:
        return self.process.wait(timeout=FAILSAFE_S)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=FAILSAFE_S)
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
