"""The real `jigcmd jarvis` and what is not plain HTTP/1.1: WebSocket upgrades, other versions,
absolute-form targets, a trailing slash.

`websockets` is in the test extras, importable by the child as it may be in an operator's
environment: uvicorn would take it up on its own and hand an upgrade over to it, past the
token check, the audit and the count of held connections (which then never let go of it).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import httpx
import pytest

from tests.jarvis.edge_wire import ANSWER_S, Answer, exchange, request, until_audited
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import auth

# The connection cap of the child: the upgrades below are more than it.
MAX_CONNECTIONS = 4
_UPGRADE = (
    "Upgrade: websocket",
    "Connection: Upgrade",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Version: 13",
)
_WEBSOCKET = "WebSocket is not served: jarvis answers HTTP/1.1 requests only"


@pytest.fixture(scope="module")
def jarvis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JarvisChild]:
    """One real jarvis child, few connections, `websockets` importable by it."""
    machine_runs_jarvis()
    assert importlib.util.find_spec("websockets") is not None, "the test extras hold websockets"
    args = ("--max-connections", str(MAX_CONNECTIONS))
    with JarvisChild(tmp_path_factory.mktemp("jarvis"), args) as child:
        yield child


def test_websocket_upgrades_without_a_token_are_refused_counted_and_never_held(
    jarvis: JarvisChild,
) -> None:
    """More upgrades than the cap, each a 403 JSON error and counted; then a call is served."""
    upgrade = request(jarvis.port, "/utcp", method="GET", token=False, headers=_UPGRADE)
    for _ in range(2 * MAX_CONNECTIONS):
        answer = Answer(exchange(jarvis.port, upgrade))
        assert (answer.status, answer.body) == (
            403,
            {"error": "forbidden: missing Authorization header"},
        ), answer.raw
    with httpx.Client(timeout=ANSWER_S) as client:
        assert jarvis.check(client).status_code == 200
    until_audited(jarvis, "missing Authorization header")


def test_a_websocket_upgrade_with_the_token_is_refused_and_audited(jarvis: JarvisChild) -> None:
    """400 with words that say why, one audit row of the actor; the connection is not held."""
    headers = (*_UPGRADE[:1], "Connection: close, Upgrade", *_UPGRADE[2:])
    upgrade = request(jarvis.port, "/utcp", method="GET", headers=headers)
    for _ in range(2 * MAX_CONNECTIONS):
        answer = Answer(exchange(jarvis.port, upgrade))
        assert (answer.status, answer.body) == (400, {"error": _WEBSOCKET}), answer.raw
    with httpx.Client(timeout=ANSWER_S) as client:
        assert jarvis.check(client).status_code == 200
    until_audited(jarvis, f"refused: {_WEBSOCKET}")


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", id="h2-preface"),
        pytest.param(b"GET /utcp HTTP/2.0\r\n\r\n", id="2.0"),
        pytest.param(b"GET /utcp HTTP/3.0\r\nHost: 127.0.0.1\r\n\r\n", id="3.0"),
    ],
)
def test_a_request_of_another_major_version_is_a_505(jarvis: JarvisChild, data: bytes) -> None:
    """Not a 403 for a missing token: the version is what jarvis does not speak."""
    answer = Answer(exchange(jarvis.port, data))
    version = data.split(b"\r\n")[0].rsplit(b" ", 1)[1].decode()
    expected = f"{version} is not supported: jarvis speaks HTTP/1.1 (and 1.0)"
    assert (answer.status, answer.body) == (505, {"error": expected}), answer.raw
    assert answer.headers["connection"] == "close"


def test_a_higher_minor_version_is_served_as_http_1_1(jarvis: JarvisChild) -> None:
    """RFC 9112 §2.3: HTTP/1.2 is processed as the highest 1.x the server implements."""
    answer = Answer(exchange(jarvis.port, request(jarvis.port, version="HTTP/1.2",
                                                  headers=("Connection: close",))))  # fmt: skip
    assert answer.status == 200, answer.raw


@pytest.mark.parametrize(
    ("authority", "status"),
    [pytest.param("{port}", 200, id="ours"), pytest.param("evil.example", 421, id="foreign")],
)
def test_an_absolute_form_target_is_served_by_its_authority(
    jarvis: JarvisChild, authority: str, status: int
) -> None:
    """RFC 9112 §3.2.2: accepted; its authority, not the Host header, is the checked host."""
    authority = authority.format(port=f"127.0.0.1:{jarvis.port}")
    target = f"http://{authority}/tools/jarvis.policy.check"
    answer = Answer(exchange(jarvis.port, request(jarvis.port, target,
                                                  headers=("Connection: close",))))  # fmt: skip
    assert answer.status == status, answer.raw


@pytest.mark.parametrize("path", ["/tools/jarvis.policy.check/", "/utcp/"])
def test_a_trailing_slash_is_a_json_404_and_audited(jarvis: JarvisChild, path: str) -> None:
    """Never a redirect to another URL: a 404 in the one error shape, its row the actor's."""
    with httpx.Client(timeout=ANSWER_S) as client:
        answer = client.request(
            "POST" if path.startswith("/tools") else "GET",
            f"{jarvis.base}{path}",
            json={"tool": "jarvis.policy.check", "args": {"argv": ["echo", "hi"]}},
            headers=auth(),
        )
    assert (answer.status_code, answer.json()) == (404, {"error": "Not Found"}), answer.text
    shown = until_audited(jarvis, path.removeprefix("/tools/"))
    assert "refused: Not Found" in shown, shown


def test_the_module_leaves_the_child_serving(jarvis: JarvisChild) -> None:
    """No request above took the server down or left a traceback."""
    with httpx.Client(timeout=ANSWER_S) as client:
        assert jarvis.check(client).status_code == 200
    assert "Traceback" not in jarvis.stderr(), jarvis.stderr()
