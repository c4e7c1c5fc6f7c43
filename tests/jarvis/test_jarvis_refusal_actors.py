"""The real `jigcmd jarvis`: a request refused before the application (a head h11 refuses,
its version or its framing) that carried the valid token is audited as its actor's.

Each request names its own tool (`/tools/<case>`), so the audit tells the cases apart; the
same requests without the token leave no row of an actor (they are only counted).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from jigcmd.jarvis.refusals import UNAUTHENTICATED
from tests.jarvis.edge_wire import ROW_S, Answer, audit, exchange, request
from tests.jarvis.jarvis_child import JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import TOKEN

_CHUNKED = "Transfer-Encoding: chunked"
_CALL = b'{"tool":"jarvis.policy.check","args":{"argv":["echo","actor"]}}'


@pytest.fixture(scope="module")
def jarvis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JarvisChild]:
    """One real jarvis child for the module."""
    machine_runs_jarvis()
    with JarvisChild(tmp_path_factory.mktemp("jarvis")) as child:
        yield child


def _request(port: int, case: str, shape: dict[str, str], *, token: bool) -> bytes:
    """A `policy.check` body sent to `/tools/jigcmd-<case>`, shaped as the case says."""
    headers = tuple(shape["headers"].split("\n")) if "headers" in shape else ()
    version = shape.get("version", "HTTP/1.1")
    target = f"/tools/jigcmd-{case}"
    data = request(port, target, version=version, token=token, headers=headers, body=_CALL)
    if "length" in shape:
        return data.replace(f"Content-Length: {len(_CALL)}".encode(), shape["length"].encode())
    return data


_CASES = [
    pytest.param("gzip", {"headers": "Transfer-Encoding: gzip, chunked"}, 501, id="501"),
    pytest.param("digits", {"length": "Content-Length: " + "9" * 21}, 413, id="413"),
    pytest.param("bad-head", {"headers": "X A: b"}, 400, id="head"),
    pytest.param("cl-te", {"headers": f"Content-Length: 5\n{_CHUNKED}"}, 400, id="cl-te"),
    pytest.param("http2", {"version": "HTTP/2.0"}, 505, id="http2"),
]


def _rows(jarvis: JarvisChild, case: str) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in audit(jarvis).splitlines()]
    return [row for row in rows if row["tool"] == f"jigcmd-{case}"]


@pytest.mark.parametrize(("case", "shape", "status"), _CASES)
def test_a_refusal_before_the_application_is_its_actors(
    jarvis: JarvisChild, case: str, shape: dict[str, str], status: int
) -> None:
    """Answered as before; one audit row of the token's actor with that answer, none for
    the same request without the token (sent first)."""
    for token in (False, True):
        answer = Answer(exchange(jarvis.port, _request(jarvis.port, case, shape, token=token)))
        assert answer.status == status, answer.raw
    assert isinstance(answer.body, dict)
    deadline = time.monotonic() + ROW_S
    while not (rows := _rows(jarvis, case)):
        assert time.monotonic() < deadline, audit(jarvis)
        time.sleep(0.1)
    (row,) = rows
    assert row["actor"] not in ("", UNAUTHENTICATED), row
    assert (row["decision"], row["outcome"]) == ("invalid", f"refused: {answer.body['error']}")


def _bytes_after_the_head(port: int) -> dict[str, bytes]:
    """Refused heads without the token, the token only in the bytes read with them."""
    carried = f"Authorization: Bearer {TOKEN}\r\n".encode()
    return {
        # The token as a line of the body.
        "in-body": request(port, "/tools/jigcmd-in-body", token=False, headers=("X A: b",),
                           body=carried),
        # The token in the request pipelined after it.
        "in-next": request(port, "/tools/jigcmd-in-next", method="GET", token=False,
                           headers=("X A: b",)) + request(port, "/tools/jigcmd-next"),
    }  # fmt: skip


def test_a_token_past_the_refused_head_does_not_make_it_its_actors(jarvis: JarvisChild) -> None:
    """Only the head's own `Authorization` lines are read: no row for either case, though a
    refused head with the token sent after them (rows are written in order) has its own."""
    for data in _bytes_after_the_head(jarvis.port).values():
        assert Answer(exchange(jarvis.port, data)).status == 400
    marker = request(jarvis.port, "/tools/jigcmd-after", headers=("X A: b",))
    assert Answer(exchange(jarvis.port, marker)).status == 400
    deadline = time.monotonic() + ROW_S
    while not _rows(jarvis, "after"):
        assert time.monotonic() < deadline, audit(jarvis)
        time.sleep(0.1)
    assert _rows(jarvis, "in-body") == [] and _rows(jarvis, "in-next") == [], audit(jarvis)
