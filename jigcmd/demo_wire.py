"""A `jigcmd serve` child spoken to by hand-written JSON-RPC frames (the demo's client side).

Deliberately not the MCP SDK: the demo shows the exact frames a caller sends and receives.
Both output pipes are read without threads; every wait is bounded, and a child that breaks
the protocol, dies or stays silent is reported with what it wrote on stderr.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from jigcmd.jsonio import strict

__all__ = ["ServerChild", "WireError"]

_ANSWER_SECONDS = 30.0


class WireError(Exception):
    """Raised when the server child breaks the protocol, dies, or does not answer in time."""

    def __init__(self, message: str, stderr: str) -> None:
        super().__init__(message)
        self.stderr = stderr


class ServerChild:
    """`python -m jigcmd serve --binding BINDING` with pipes on all three stdio fds."""

    def __init__(
        self, binding: Path, timeout: float = _ANSWER_SECONDS, args: Sequence[str] = ()
    ) -> None:
        """Start the server; `args` are further `serve` options (`--state-dir …`)."""
        self._timeout = timeout
        self._process = subprocess.Popen(
            [sys.executable, "-m", "jigcmd", "serve", "--binding", str(binding), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self._process.stdout is not None and self._process.stderr is not None
        self._stdout = self._process.stdout.fileno()
        self._stderr = self._process.stderr.fileno()
        self._buffers = {self._stdout: bytearray(), self._stderr: bytearray()}
        self._selector = selectors.DefaultSelector()
        for fd in self._buffers:
            os.set_blocking(fd, False)
            self._selector.register(fd, selectors.EVENT_READ)
        self._next_id = 1

    def __enter__(self) -> ServerChild:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._selector.close()
        for stream in (self._process.stdin, self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()

    @property
    def stderr(self) -> str:
        """What the server wrote on stderr so far."""
        return self._buffers[self._stderr].decode("utf-8", "replace")

    def _fail(self, message: str) -> WireError:
        return WireError(message, self.stderr)

    def _send(self, message: dict[str, Any]) -> None:
        frame = msgspec.json.encode(message) + b"\n"
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(frame)
            self._process.stdin.flush()
        except OSError as exc:
            raise self._fail(f"cannot write to the server's stdin: {exc}") from exc

    def notify(self, method: str, params: object) -> None:
        """Send a notification (no answer expected)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)

    def request(self, method: str, params: object) -> dict[str, Any]:
        """Send a request and return its decoded response."""
        response = strict.loads(self.request_raw(method, params))
        assert isinstance(response, dict)  # request_raw returns only object frames
        return response

    def request_raw(
        self, method: str, params: object, request_id: str | int | None = None
    ) -> bytes:
        """Send a request and return the exact response line (without its LF)."""
        if request_id is None:
            request_id = self._next_id
            self._next_id += 1
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        deadline = time.monotonic() + self._timeout
        while True:
            frame = self._frame(deadline, method)
            try:
                message = strict.loads(frame)
            except strict.StrictJSONError as exc:
                raise self._fail(
                    f"stdout carried a line that is not JSON: {frame[:200]!r}"
                ) from exc
            if not isinstance(message, dict):
                raise self._fail(f"stdout carried a frame that is not an object: {frame[:200]!r}")
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return frame
            # Notifications (progress) and anything else addressed elsewhere: not our answer.

    def _frame(self, deadline: float, method: str) -> bytes:
        out = self._buffers[self._stdout]
        while b"\n" not in out:
            if not self._pump(deadline):
                # Both pipes can shut an instant before the process is reaped: give it a
                # moment to exit (bounded by the deadline) before calling it silent.
                try:
                    status = self._process.wait(max(0.0, min(2.0, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    status = None
                if status is not None:
                    raise self._fail(
                        f"the server exited with status {status} before answering {method}"
                    )
                raise self._fail(f"no answer to {method} within {self._timeout:.0f} s")
        line, _, rest = bytes(out).partition(b"\n")
        out[:] = rest
        return line

    def _pump(self, deadline: float) -> bool:
        """Read what is ready on stdout and stderr; False at the deadline or once both are shut."""
        if not self._selector.get_map():
            return False
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            return False
        for key, _ in self._selector.select(timeout):
            fd = int(key.fd)
            chunk = os.read(fd, 65_536)
            if chunk:
                self._buffers[fd] += chunk
            else:
                self._selector.unregister(fd)
        return True

    def close(self, timeout: float) -> int | None:
        """Close stdin; the exit status if the server ends within `timeout` s, else None."""
        assert self._process.stdin is not None
        self._process.stdin.close()
        deadline = time.monotonic() + timeout
        while self._pump(deadline):
            pass
        try:
            return self._process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            return None
