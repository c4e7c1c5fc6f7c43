"""`jigcmd serve` as a child process, spoken to in hand-written JSON-RPC frames.

Deliberately not the MCP SDK: the demo shows the exact frames a caller sends and receives, and
the tests drive the real server byte for byte. Requests are sent, and their answers claimed
later by id, so a caller can kill, stop or cancel in between. One selector reads stdout (and
stderr, when it is a pipe) without threads; every wait is bounded, and a child that breaks the
protocol, dies or stays silent is reported with what it wrote on stderr.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from jigcmd.jsonio import strict

__all__ = ["ANSWER_SECONDS", "ServeChild", "WireError"]

ANSWER_SECONDS = 30.0
_READ_BYTES = 1 << 20


class WireError(Exception):
    """Raised when the server child breaks the protocol, dies, or does not answer in time."""

    def __init__(self, message: str, stderr: str) -> None:
        super().__init__(message)
        self.message = message
        self.stderr = stderr

    def __str__(self) -> str:
        if not self.stderr:
            return self.message
        return f"{self.message}\n--- server stderr ---\n{self.stderr}"


class ServeChild:
    """`python -m jigcmd serve --binding BINDING [ARGS]` with pipes on stdin and stdout.

    stderr is a pipe read alongside stdout, or, with `stderr_path`, that file. With
    `socket_stdout`, stdout is one end of a socketpair instead, as Node's `child_process`
    (every Node-based MCP host) gives it.
    """

    def __init__(
        self,
        binding: Path,
        args: Sequence[str] = (),
        *,
        timeout: float = ANSWER_SECONDS,
        stderr_path: Path | None = None,
        launcher: Sequence[str] = (),
        socket_stdout: bool = False,
    ) -> None:
        """Start the server; `args` are further `serve` options (`--state-dir …`).

        `launcher` is a command the server runs under (`unshare --pid --fork …`, say).
        """
        serve = [sys.executable, "-m", "jigcmd", "serve", "--binding", str(binding), *args]
        argv = [*launcher, *serve]
        self.timeout = timeout
        self._stderr_path = stderr_path
        # Our end of a socketpair stdout, when the server's stdout is the other end.
        self._socket: socket.socket | None = None
        theirs: socket.socket | None = None
        if socket_stdout:
            self._socket, theirs = socket.socketpair()
        stdout = subprocess.PIPE if theirs is None else theirs.fileno()
        try:
            with contextlib.ExitStack() as stack:
                stderr = (
                    subprocess.PIPE
                    if stderr_path is None
                    else stack.enter_context(stderr_path.open("wb"))
                )
                self.process = subprocess.Popen(
                    argv, stdin=subprocess.PIPE, stdout=stdout, stderr=stderr
                )
        finally:
            if theirs is not None:
                theirs.close()
        out = self.process.stdout if self._socket is None else self._socket
        assert out is not None
        self._out = out.fileno()
        self._selector = selectors.DefaultSelector()
        self._stdout = bytearray()
        self._stderr = bytearray()
        read = [self._out]
        if self.process.stderr is not None:
            read.append(self.process.stderr.fileno())
        for fd in read:
            os.set_blocking(fd, False)
            self._selector.register(fd, selectors.EVENT_READ)
        self._eof = False
        # Every complete line the server wrote, in order, and those not yet claimed by id.
        self.lines: list[bytes] = []
        self._unclaimed: list[bytes] = []
        self._next_id = 1

    @property
    def pid(self) -> int:
        """The server's pid (its launcher's, when it has one)."""
        return self.process.pid

    @property
    def output_socket(self) -> socket.socket | None:
        """Our end of the server's stdout when it is a socketpair (`socket_stdout`)."""
        return self._socket

    def __enter__(self) -> ServeChild:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.kill()
        self._selector.close()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            # A write the server's end refused is still buffered: closing flushes it again.
            if stream is not None:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()
        if self._socket is not None:
            self._socket.close()

    def stderr(self) -> str:
        """What the server wrote on stderr so far."""
        if self._stderr_path is not None:
            return self._stderr_path.read_text("utf-8", "replace")
        self._pump(0)
        return self._stderr.decode("utf-8", "replace")

    def _fail(self, message: str) -> WireError:
        return WireError(message, self.stderr())

    # -- writing -------------------------------------------------------------------------

    def send(self, *messages: object) -> None:
        """Write these frames in one write (one read on the server's side, when they fit)."""
        self.send_bytes(b"".join(msgspec.json.encode(m) + b"\n" for m in messages))

    def send_bytes(self, data: bytes) -> None:
        """Write raw bytes to the server's stdin."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(data)
            self.process.stdin.flush()
        except OSError as exc:
            raise self._fail(f"cannot write to the server's stdin: {exc}") from exc

    def notify(self, method: str, params: object) -> None:
        """Send a notification (no answer expected)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    # -- reading -------------------------------------------------------------------------

    def request(self, method: str, params: object) -> dict[str, Any]:
        """Send a request and return its decoded response."""
        return _decoded(self.request_raw(method, params))

    def request_raw(
        self, method: str, params: object, request_id: str | int | None = None
    ) -> bytes:
        """Send a request and return the exact response line (without its LF)."""
        if request_id is None:
            request_id = self._next_id
            self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return self.response(request_id, what=method)

    def ping(self, request_id: str) -> None:
        """A ping answered: the server finished start-up (recovery included) and serves."""
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
        self.response(request_id, what="ping")

    def response(
        self, request_id: object, timeout: float | None = None, *, what: str | None = None
    ) -> bytes:
        """The exact response line for `request_id` (without LF), waiting at most `timeout`."""
        timeout = self.timeout if timeout is None else timeout
        what = repr(request_id) if what is None else what
        deadline = time.monotonic() + timeout
        while True:
            found = self._claim(request_id)
            if found is not None:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._fail(f"no answer to {what} within {timeout:.0f} s")
            if not self._pump(remaining):
                raise self._fail(
                    f"the server exited with status {self._status(deadline)} "
                    f"before answering {what}"
                )

    def answer(self, request_id: object, timeout: float | None = None) -> dict[str, Any]:
        """The decoded response for `request_id`."""
        return _decoded(self.response(request_id, timeout))

    def answered(self, request_id: object) -> bool:
        """Whether a response for `request_id` arrived by now (without consuming it)."""
        self._pump(0)
        return any(self._answers(line, request_id) for line in self._unclaimed)

    def _claim(self, request_id: object) -> bytes | None:
        for index, line in enumerate(self._unclaimed):
            if self._answers(line, request_id):
                del self._unclaimed[index]
                return line
        return None

    def _answers(self, line: bytes, request_id: object) -> bool:
        """Whether `line` is the response to `request_id` (notifications never are)."""
        try:
            message = strict.loads(line)
        except strict.StrictJSONError as exc:
            raise self._fail(f"stdout carried a line that is not JSON: {line[:200]!r}") from exc
        if not isinstance(message, dict):
            raise self._fail(f"stdout carried a frame that is not an object: {line[:200]!r}")
        return message.get("id") == request_id and "method" not in message

    def _pump(self, timeout: float) -> bool:
        """Read what is ready within `timeout`; False once stdout is at EOF."""
        if not self._selector.get_map():
            return not self._eof
        # At stdout's EOF only stderr is left: read what it has, never wait for it here.
        for key, _ in self._selector.select(0 if self._eof else timeout):
            fd = int(key.fd)
            try:
                chunk = os.read(fd, _READ_BYTES)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                # A socket stdout the server closed with bytes we wrote into it unread.
                chunk = b""
            if not chunk:
                self._selector.unregister(fd)
                self._eof = self._eof or fd == self._out
            elif fd == self._out:
                self._take(chunk)
            else:
                self._stderr += chunk
        return not self._eof

    def _take(self, chunk: bytes) -> None:
        self._stdout += chunk
        while b"\n" in self._stdout:
            line, _, rest = bytes(self._stdout).partition(b"\n")
            self._stdout[:] = rest
            self.lines.append(line)
            self._unclaimed.append(line)

    def _status(self, deadline: float) -> int | None:
        # stdout can shut an instant before the process is reaped: give it a moment to exit
        # (bounded by the deadline) before calling it gone without a status.
        try:
            return self.process.wait(max(0.0, min(2.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            return None

    # -- ending --------------------------------------------------------------------------

    def close_input(self, timeout: float | None = None) -> int:
        """Close stdin, read stdout to EOF and return the exit status."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.wait_exit(self.timeout if timeout is None else timeout)

    def close(self, timeout: float) -> int | None:
        """Close stdin; the exit status if the server ends within `timeout` s, else None."""
        try:
            return self.close_input(timeout)
        except WireError:
            self.kill()
            return None

    def terminate(self, timeout: float | None = None) -> int:
        """SIGTERM, read stdout to EOF and return the exit status."""
        self.process.send_signal(signal.SIGTERM)
        return self.wait_exit(self.timeout if timeout is None else timeout)

    def close_output(self, timeout: float | None = None) -> int:
        """Stop reading: close our end of the server's stdout; the server's exit status."""
        if not self._eof:
            self._eof = True
            self._selector.unregister(self._out)
        out = self.process.stdout if self._socket is None else self._socket
        assert out is not None
        out.close()
        timeout = self.timeout if timeout is None else timeout
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


def _decoded(line: bytes) -> dict[str, Any]:
    message = strict.loads(line)
    # Only object frames are ever claimed as responses.
    assert isinstance(message, dict)
    return message
