"""What the real `jigcmd jarvis` answers to requests at the edge of the rules, and its words.

Two `Authorization` headers are refused (never one of them taken), an HTTP/1.0 request needs
no `Host` (HTTP/1.1 still does), and two denials say what the program is.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import TOKEN, auth, invoke_body

ANSWER_S = 10.0
# A failsafe for the audit row, written by the server's own task.
ROW_S = 30.0
WRONG = "Bearer not-the-token-0123456789"


@pytest.fixture(scope="module")
def jarvis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JarvisChild]:
    """One real jarvis child for the module (its default policy allows echo)."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path_factory.mktemp("jarvis")) as child:
        yield child


def _raw(port: int, request: bytes) -> tuple[int, dict[str, object]]:
    """Send `request` alone on a connection; the status and JSON body of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_S) as sock:
        sock.sendall(request)
        received = bytearray()
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = bytes(received).partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


def _check(version: str, host: str | None, authorization: list[str], port: int) -> bytes:
    body = json.dumps(invoke_body("jarvis.policy.check", argv=["echo", "hi"])).encode()
    lines = [f"POST /tools/jarvis.policy.check HTTP/{version}"]
    lines += [f"Host: {host}"] if host is not None else []
    lines += [f"Authorization: {value}" for value in authorization]
    lines += ["Content-Type: application/json", f"Content-Length: {len(body)}", "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@pytest.mark.parametrize(
    "authorization",
    [[f"Bearer {TOKEN}", WRONG], [WRONG, f"Bearer {TOKEN}"], [f"Bearer {TOKEN}"] * 2],
    ids=["good-then-bad", "bad-then-good", "good-twice"],
)
def test_two_authorization_headers_are_refused_whichever_comes_first(
    jarvis: JarvisChild, authorization: list[str]
) -> None:
    """400, never the first (or the last) of them taken; counted in the audit."""
    host = f"127.0.0.1:{jarvis.port}"
    status, body = _raw(jarvis.port, _check("1.1", host, authorization, jarvis.port))
    assert (status, body) == (400, {"error": "more than one Authorization header"})
    deadline = time.monotonic() + ROW_S
    while "more than one Authorization header" not in _audit(jarvis):
        assert time.monotonic() < deadline, _audit(jarvis)
        time.sleep(0.1)


def _audit(jarvis: JarvisChild) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "jarvis-audit", "--state-dir", str(jarvis.state_dir)],
        capture_output=True, text=True, timeout=ANSWER_S, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return done.stdout


def test_an_http_1_0_request_without_host_is_answered(jarvis: JarvisChild) -> None:
    """HTTP/1.0 had no Host header; without one it names no other server."""
    request = _check("1.0", None, [f"Bearer {TOKEN}"], jarvis.port)
    status, body = _raw(jarvis.port, request)
    assert (status, body["decision"]) == (200, "allow"), body


def test_an_http_1_1_request_without_host_is_still_refused(jarvis: JarvisChild) -> None:
    """HTTP/1.1 requires Host: a request without one is not answered as a call."""
    request = _check("1.1", None, [f"Bearer {TOKEN}"], jarvis.port)
    status, _ = _raw(jarvis.port, request)
    assert status == 400


@pytest.mark.parametrize(
    ("argv0", "reason"),
    [
        ("/dev/fd/0", "program '/dev/fd/0' is not an executable file"),
        (
            "/proc/self/root/usr/bin/echo",
            "rule 'echo' matched, but program '/proc/self/root/usr/bin/echo' is named by a "
            f"path outside host_dirs and cwd (it resolves to {os.path.realpath('/usr/bin/echo')!r}"
            ", which the envelope shows): call it by that path",
        ),
    ],
    ids=["dev-fd", "proc-self-root"],
)
def test_a_denial_says_what_the_program_is(jarvis: JarvisChild, argv0: str, reason: str) -> None:
    """Denied (deny by default), with words that fit: not executable; named outside."""
    with httpx.Client(timeout=ANSWER_S) as client:
        answer = client.post(
            f"{jarvis.base}/tools/jarvis.policy.check",
            json=invoke_body("jarvis.policy.check", argv=[argv0]),
            headers=auth(),
        )
    assert answer.status_code == 200, answer.text
    assert (answer.json()["decision"], answer.json()["reason"]) == ("deny", reason)


def test_the_module_leaves_the_child_serving(jarvis: JarvisChild) -> None:
    """No request above took the server down or left a traceback."""
    with httpx.Client(timeout=ANSWER_S) as client:
        assert jarvis.check(client).status_code == 200
    assert "Traceback" not in jarvis.stderr(), jarvis.stderr()
