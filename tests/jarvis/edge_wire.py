"""Raw-socket exchanges with a real `jigcmd jarvis` child, and its audit as the CLI prints it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

from tests.jarvis.jarvis_child import JarvisChild
from tests.jarvis.jarvis_harness import TOKEN

__all__ = ["Answer", "audit", "exchange", "request", "until_audited"]

# Failsafes, never timing claims.
ANSWER_S = 10.0
ROW_S = 30.0


class Answer:
    """One answer read off the wire: its status, headers (lowercased names) and JSON body."""

    def __init__(self, raw: bytes) -> None:
        head, _, body = raw.partition(b"\r\n\r\n")
        while head.startswith(b"HTTP/1.1 1"):
            # An interim answer (a client must parse any, RFC 9110 §15.2): the final follows.
            head, _, body = body.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        assert lines[0].startswith("HTTP/1.1 "), raw
        self.raw = raw
        self.status = int(lines[0].split(" ")[1])
        self.headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:])
        }
        self.body: object = json.loads(body) if body else None


def request(
    port: int,
    target: str = "/tools/jarvis.policy.check",
    *,
    method: str = "POST",
    version: str = "HTTP/1.1",
    token: bool = True,
    headers: tuple[str, ...] = (),
    body: bytes | None = None,
) -> bytes:
    """One request's bytes; a `policy.check` of `echo hi` unless told otherwise."""
    if body is None and method == "POST":
        body = b'{"tool":"jarvis.policy.check","args":{"argv":["echo","hi"]}}'
    lines = [f"{method} {target} {version}", f"Host: 127.0.0.1:{port}"]
    lines += [f"Authorization: Bearer {TOKEN}"] if token else []
    if body is not None:
        lines += ["Content-Type: application/json"]
        if not any(h.lower().startswith("transfer-encoding") for h in headers):
            lines += [f"Content-Length: {len(body)}"]
    lines += list(headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


def exchange(port: int, data: bytes, *, half_close: bool = False) -> bytes:
    """Send `data` on a new connection (then end the stream, with `half_close`); every byte
    the server sends until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_S) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        received = bytearray()
        while chunk := sock.recv(65536):
            received += chunk
    return bytes(received)


def audit(jarvis: JarvisChild) -> str:
    """`jigcmd jarvis-audit` of the child's state directory."""
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "jarvis-audit", "--state-dir", str(jarvis.state_dir)],
        capture_output=True, text=True, timeout=ANSWER_S, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return done.stdout


def until_audited(jarvis: JarvisChild, words: str) -> str:
    """The audit once it shows `words` (fail after the failsafe)."""
    deadline = time.monotonic() + ROW_S
    while words not in (shown := audit(jarvis)):
        assert time.monotonic() < deadline, shown
        time.sleep(0.1)
    return shown
