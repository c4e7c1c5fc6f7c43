"""`jigcmd jarvis` as a child process on a free loopback port, and the neighbours that hit it.

The child is the real server (uvicorn, the bounded protocol, the journal, the envelope); its
stderr goes to a file the tests read. It needs what `jigcmd jarvis` needs: root and cgroups
(locally a skip naming what is missing, under CI a failure).
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import httpx

from jigcmd.journal.store import Journal
from tests.jarvis.jarvis_harness import TOKEN, auth, invoke_body
from tests.required import require_root, usable_cgroups

__all__ = ["JarvisChild", "half_open", "machine_runs_jarvis", "open_fds"]

# How long the child may take to say it serves (a failsafe, never a timing claim).
_START_S = 60.0
_SERVING = re.compile(r"serving (http://127\.0\.0\.1:(\d+))/utcp")
POLICY = """
search_path = ["/usr/bin", "/bin"]

[[rule]]
name = "echo"
decision = "allow"
argv0 = ["echo", "true", "sleep"]
"""


def machine_runs_jarvis() -> None:
    """Skip (fail under CI) unless `jigcmd jarvis` can start here: root and usable cgroups."""
    require_root("jigcmd jarvis needs root here")
    usable_cgroups()


class JarvisChild:
    """`python -m jigcmd jarvis --port 0` on its own state directory, until closed."""

    def __init__(
        self,
        tmp: Path,
        args: Sequence[str] = (),
        *,
        policy: str = POLICY,
        env: Mapping[str, str] | None = None,
        cpus: set[int] | None = None,
    ) -> None:
        policy_file = tmp / "policy.toml"
        policy_file.write_text(policy)
        self.state_dir = tmp / "jarvis-state"
        self.stderr_path = tmp / "jarvis.stderr"
        # Whatever the child makes in TMPDIR stays in the test's own tmp; `env` adds to (or
        # overrides) the environment.
        env = {**os.environ, "JARVIS_BEARER_TOKEN": TOKEN, "TMPDIR": str(tmp), **(env or {})}
        argv = [
            *(sys.executable, "-m", "jigcmd", "jarvis", "--policy", str(policy_file)),
            *("--port", "0", "--state-dir", str(self.state_dir), *args),
        ]
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=env,
                # `cpus`: the server's affinity, as `taskset -c` would start it (one system
                # call after fork, no lock taken: safe with threads).
                preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),  # noqa: PLW1509
            )
        self.base, self.port = self._wait_serving()

    @property
    def pid(self) -> int:
        """The server's pid."""
        return self.process.pid

    def stderr(self) -> str:
        """What the server wrote on stderr so far."""
        return self.stderr_path.read_text("utf-8", "replace")

    def _wait_serving(self) -> tuple[str, int]:
        deadline = time.monotonic() + _START_S
        while time.monotonic() < deadline:
            found = _SERVING.search(self.stderr())
            if found:
                return found.group(1), int(found.group(2))
            if self.process.poll() is not None:
                raise AssertionError(f"jarvis exited {self.process.returncode}: {self.stderr()}")
            time.sleep(0.05)
        raise AssertionError(f"jarvis did not start within {_START_S} s: {self.stderr()}")

    def check(self, client: httpx.Client) -> httpx.Response:
        """One authorized `policy.check` call."""
        return client.post(
            f"{self.base}/tools/jarvis.policy.check",
            json=invoke_body("jarvis.policy.check", argv=["echo", "hi"]),
            headers=auth(),
        )

    def call(self, client: httpx.Client, tool: str, **fields: object) -> httpx.Response:
        """One authorized call of `tool` with `fields`, as a UTCP client sends it."""
        return client.post(
            f"{self.base}/tools/{tool}", json=invoke_body(tool, **fields), headers=auth()
        )

    def run_started(self) -> bool:
        """Whether a run's start is audited: its row is begun, and then its start is written
        (read-only: a reader must not write, nor fold, the journal it looks at)."""
        with Journal.open_read_only(self.state_dir) as journal:
            return any(row.outcome.startswith("started run ") for row in journal.audit_rows())

    def signal(self, signum: int) -> None:
        """Send `signum` to the server."""
        os.kill(self.pid, signum)

    def wait(self, timeout: float = _START_S) -> int:
        """The server's exit status, once it exited."""
        return self.process.wait(timeout)

    def __enter__(self) -> JarvisChild:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(_START_S)


def open_fds(pid: int) -> int:
    """How many file descriptors `pid` holds."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def half_open(port: int, count: int, *, within: float = 5.0) -> list[socket.socket]:
    """`count` connections that send an unfinished request head, then nothing.

    The head is the one of the reported attack: a request line and `Host`, no blank line.
    Connections the server has not accepted `within` seconds are left pending.
    """
    head = f"POST /tools/jarvis.policy.check HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    sockets: list[socket.socket] = []
    selector = selectors.DefaultSelector()
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        selector.register(sock, selectors.EVENT_WRITE)
        sockets.append(sock)
    pending = count
    deadline = time.monotonic() + within
    while pending and time.monotonic() < deadline:
        for key, _ in selector.select(0.1):
            connected = key.fileobj
            assert isinstance(connected, socket.socket)
            selector.unregister(connected)
            pending -= 1
            if connected.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                with contextlib.suppress(OSError):
                    connected.send(head)
    selector.close()
    return sockets
