"""A real `jigcmd serve` child for lifetime tests: raw frames in, raw response lines out.

Unlike the demo's client this one never waits for an answer it did not ask for: requests are
sent, answers collected later by id, so a test can kill, stop or cancel in between. Every wait
is bounded; the server's stderr goes to a file that failures quote.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["ANSWER_SECONDS", "ServerProcess", "WireError", "flow_call", "without_id"]

ANSWER_SECONDS = 60.0


class WireError(AssertionError):
    """Raised when the server breaks the wire, dies, or does not answer in time."""


def flow_call(request_id: str, operation_id: str, input: object, **extra: object) -> dict[str, Any]:
    """A `capability/call` request frame (extra params such as `deadlineUnixMs` allowed)."""
    params: dict[str, Any] = {
        "operationId": operation_id,
        "slot": "command",
        "method": "run",
        "input": input,
        **extra,
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "capability/call", "params": params}


def without_id(line: bytes) -> dict[str, Any]:
    """A response line's object without its JSON-RPC id (for byte-level replay comparison)."""
    message: dict[str, Any] = json.loads(line)
    message.pop("id", None)
    return message


class ServerProcess:
    """`python -m jigcmd serve` on a state directory, with pipes on stdin and stdout."""

    def __init__(
        self,
        binding: Path,
        state_dir: Path,
        stderr_path: Path,
        *,
        max_envelopes: int | None = None,
        protocol: str = "auto",
        run_id: str | None = None,
    ) -> None:
        argv = [
            sys.executable,
            "-m",
            "jigcmd",
            "serve",
            "--binding",
            str(binding),
            "--state-dir",
            str(state_dir),
            "--protocol",
            protocol,
        ]
        if max_envelopes is not None:
            argv += ["--max-envelopes", str(max_envelopes)]
        if run_id is not None:
            argv += ["--run-id", run_id]
        self.stderr_path = stderr_path
        with stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
            )
        assert self.process.stdout is not None
        self._out = self.process.stdout.fileno()
        os.set_blocking(self._out, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._out, selectors.EVENT_READ)
        self._buffer = bytearray()
        self._eof = False
        # Every complete line the server wrote, in order, and those not yet claimed by id.
        self.lines: list[bytes] = []
        self._unclaimed: list[bytes] = []

    @property
    def pid(self) -> int:
        """The server's pid."""
        return self.process.pid

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.kill()
        self._selector.close()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()

    def stderr(self) -> str:
        """What the server wrote on stderr so far."""
        return self.stderr_path.read_text("utf-8", "replace")

    def _fail(self, message: str) -> WireError:
        return WireError(f"{message}\n--- server stderr ---\n{self.stderr()}")

    def send(self, *messages: dict[str, Any]) -> None:
        """Write these frames in one write (one read on the server's side, when they fit)."""
        self.send_bytes(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    def send_bytes(self, data: bytes) -> None:
        """Write raw bytes to the server's stdin."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except OSError as exc:
            raise self._fail(f"cannot write to the server: {exc}") from exc

    def ping(self, request_id: str) -> None:
        """A ping answered: the server finished start-up (recovery included) and serves."""
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
        self.response(request_id)

    def _pump(self, timeout: float) -> bool:
        """Read what is ready within `timeout`; False at EOF."""
        if self._eof:
            return False
        for _key, _events in self._selector.select(timeout):
            try:
                chunk = os.read(self._out, 1 << 20)
            except BlockingIOError:
                continue
            if not chunk:
                self._eof = True
                self._selector.unregister(self._out)
                return False
            self._buffer += chunk
            while b"\n" in self._buffer:
                line, _, rest = bytes(self._buffer).partition(b"\n")
                self._buffer[:] = rest
                self.lines.append(line)
                self._unclaimed.append(line)
        return True

    def _claim(self, request_id: object) -> bytes | None:
        for index, line in enumerate(self._unclaimed):
            try:
                message = json.loads(line)
            except ValueError as exc:
                raise self._fail(f"stdout carried a line that is not JSON: {line[:200]!r}") from exc
            if isinstance(message, dict) and message.get("id") == request_id:
                del self._unclaimed[index]
                return line
        return None

    def answered(self, request_id: object) -> bool:
        """Whether a line for `request_id` arrived by now (without consuming it)."""
        self._pump(0)
        return any(
            isinstance(m := json.loads(line), dict) and m.get("id") == request_id
            for line in self._unclaimed
        )

    def response(self, request_id: object, timeout: float = ANSWER_SECONDS) -> bytes:
        """The exact response line for `request_id` (without LF), waiting at most `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            found = self._claim(request_id)
            if found is not None:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail(f"no answer to {request_id!r} within {timeout:.0f} s")
            if not self._pump(remaining):
                raise self._fail(
                    f"the server closed stdout (status {self.process.poll()}) before answering "
                    f"{request_id!r}"
                )

    def answer(self, request_id: object, timeout: float = ANSWER_SECONDS) -> dict[str, Any]:
        """The decoded response for `request_id`."""
        decoded: dict[str, Any] = json.loads(self.response(request_id, timeout))
        return decoded

    def close_input(self, timeout: float = ANSWER_SECONDS) -> int:
        """Close stdin, read stdout to EOF and return the exit status."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.wait_exit(timeout)

    def terminate(self, timeout: float = ANSWER_SECONDS) -> int:
        """SIGTERM, read stdout to EOF and return the exit status."""
        self.process.send_signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def close_output(self, timeout: float = ANSWER_SECONDS) -> int:
        """Stop reading: close our end of the server's stdout; the server's exit status."""
        assert self.process.stdout is not None
        if not self._eof:
            self._eof = True
            self._selector.unregister(self._out)
        self.process.stdout.close()
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            raise self._fail(f"the server did not exit within {timeout:.0f} s") from exc

    def wait_exit(self, timeout: float) -> int:
        """Read stdout to EOF and reap the server; its exit status."""
        deadline = time.monotonic() + timeout
        while self._pump(max(0.0, deadline - time.monotonic())):
            if time.monotonic() >= deadline:
                raise self._fail(f"stdout still open after {timeout:.0f} s")
        try:
            return self.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired as exc:
            raise self._fail(f"the server did not exit within {timeout:.0f} s") from exc

    def kill(self) -> None:
        """SIGKILL the server (by its own pid) and reap it; idempotent."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
