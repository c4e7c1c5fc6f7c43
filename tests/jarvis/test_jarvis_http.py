"""Raw HTTP against the jarvis app: every auth failure, every error status, Host/Origin, bodies.

The executor is a spy: these tests are about the HTTP surface, and that nothing reaches the
executor through a refused request; what an accepted call does is test_jarvis_runs.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from jigcmd.jarvis.app import MAX_BODY_BYTES
from tests.jarvis.jarvis_harness import (
    TOKEN,
    SpyExecutor,
    auth,
    harness,
    invoke_body,
    live_server,
    make_service,
)
from tests.jarvis.utcp_setup import body as call_args
from tests.jarvis.utcp_setup import manual_template, utcp_client


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="missing"),
        pytest.param(auth("jv_wrong-token-0123456789abcdef"), id="wrong"),
        pytest.param({"Authorization": "Bearer "}, id="empty"),
        pytest.param({"Authorization": "Bearer"}, id="scheme-only"),
        pytest.param({"Authorization": f"Basic {TOKEN}"}, id="basic"),
        pytest.param({"Authorization": TOKEN}, id="no-scheme"),
        pytest.param({"Authorization": f"Bearer {TOKEN}x"}, id="token-prefix"),
    ],
)
async def test_every_authorization_failure_is_a_403_json_error(headers: dict[str, str]) -> None:
    """Missing, wrong, empty and non-Bearer credentials get 403 with a JSON error, nothing runs."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        invoked = await h.invoke("jarvis.run.create", headers=headers, argv=["echo", "hi"])
        manual = await h.client.get("/utcp", headers=headers)
    for response in (invoked, manual):
        assert response.status_code == 403
        assert response.json()["error"].startswith("forbidden")
        assert TOKEN not in response.text
    assert spy.plans == []


async def test_the_bearer_scheme_is_case_insensitive() -> None:
    """`bearer <token>` is the same credential as `Bearer <token>` (RFC 7235)."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.get("/utcp", headers={"Authorization": f"bearer {TOKEN}"})
    assert response.status_code == 200


@pytest.mark.parametrize(
    "host", ["evil.example:7777", "127.0.0.1:8888", "127.0.0.1", "localhost.evil:7777"]
)
async def test_a_foreign_host_header_is_refused_before_anything_else(host: str) -> None:
    """A Host that does not name the bound address (DNS rebinding) gets 421, even with a token."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        response = await h.client.post(
            "/tools/jarvis.run.create",
            json=invoke_body("jarvis.run.create", argv=["echo"]),
            headers={**auth(), "Host": host},
        )
    assert response.status_code == 421
    assert "error" in response.json()
    assert spy.plans == []


@pytest.mark.parametrize("host", ["127.0.0.1:7777", "localhost:7777", "LOCALHOST:7777"])
async def test_the_bound_address_and_localhost_are_accepted_hosts(host: str) -> None:
    """The bound address and `localhost` with the bound port pass the Host check."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.get("/utcp", headers={**auth(), "Host": host})
    assert response.status_code == 200


@pytest.mark.parametrize("origin", ["http://127.0.0.1:7777", "https://evil.example", "null"])
async def test_any_browser_origin_is_refused(origin: str) -> None:
    """A request carrying an Origin header (a browser page) gets 403, whatever the origin."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        response = await h.client.post(
            "/tools/jarvis.run.create",
            json=invoke_body("jarvis.run.create", argv=["echo"]),
            headers={**auth(), "Origin": origin},
        )
    assert response.status_code == 403
    assert response.json()["error"] == "browser Origin refused"
    assert spy.plans == []


async def test_an_unknown_path_is_a_404_json_error() -> None:
    """Unknown paths answer 404 with a JSON error body."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.get("/nope", headers=auth())
    assert response.status_code == 404
    assert "error" in response.json()


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/tools/jarvis.run.create"), ("POST", "/utcp")]
)
async def test_a_wrong_method_is_a_405_json_error(method: str, path: str) -> None:
    """The wrong method answers 405 with Allow and a JSON error body."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.request(method, path, headers=auth())
    assert response.status_code == 405
    assert "error" in response.json()
    assert response.headers["allow"]


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
async def test_a_body_that_is_not_declared_json_is_a_415(content_type: str | None) -> None:
    """Only `application/json` bodies are read; anything else is 415."""
    headers = auth()
    if content_type is not None:
        headers["Content-Type"] = content_type
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.post("/tools/jarvis.run.create", content=b"{}", headers=headers)
    assert response.status_code == 415
    assert "error" in response.json()


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"tool": "jarvis.run.create", "tool": "jarvis.policy.check", "args": {}}',
        b'{"tool": "jarvis.run.create", "args": {"argv": ["echo"], "timeout_ms": NaN}}',
        b"",
    ],
    ids=["garbage", "duplicate-key", "nan", "empty"],
)
async def test_a_body_that_is_not_strict_json_is_a_400(body: bytes) -> None:
    """Invalid, duplicate-key or non-finite JSON is refused with 400 and the reason."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        response = await h.client.post(
            "/tools/jarvis.run.create",
            content=body,
            headers={**auth(), "Content-Type": "application/json"},
        )
    assert response.status_code == 400
    assert "strict JSON" in response.json()["error"]
    assert spy.plans == []


async def test_an_oversized_declared_body_is_a_413() -> None:
    """A Content-Length above the limit is refused without reading the body."""
    padding = "x" * MAX_BODY_BYTES
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.post(
            "/tools/jarvis.run.create",
            content=json.dumps({"tool": "jarvis.run.create", "args": {"argv": [padding]}}),
            headers={**auth(), "Content-Type": "application/json"},
        )
    assert response.status_code == 413
    assert "error" in response.json()


async def test_an_oversized_streamed_body_is_a_413() -> None:
    """A chunked body without Content-Length is cut off once it passes the limit."""

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(MAX_BODY_BYTES // 1024 + 2):
            yield b" " * 1024

    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.post(
            "/tools/jarvis.run.create",
            content=chunks(),
            headers={**auth(), "Content-Type": "application/json"},
        )
    assert response.status_code == 413


async def test_a_body_at_the_limit_is_read() -> None:
    """A body of exactly the limit is accepted (padded with JSON whitespace)."""
    body = json.dumps(invoke_body("jarvis.policy.check", argv=["echo"])).encode()
    body += b" " * (MAX_BODY_BYTES - len(body))
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.post(
            "/tools/jarvis.policy.check",
            content=body,
            headers={**auth(), "Content-Type": "application/json"},
        )
    assert response.status_code == 200


@pytest.mark.parametrize("url_tool", ["jarvis.run.get", "jarvis.policy.check"])
async def test_a_body_naming_another_tool_than_its_url_is_refused_and_nothing_runs(
    url_tool: str,
) -> None:
    """`run.create`'s body posted to `run.get`'s (or `policy.check`'s) URL: 400, nothing runs."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        response = await h.client.post(
            f"/tools/{url_tool}",
            json=invoke_body("jarvis.run.create", argv=["echo", "smuggled"]),
            headers=auth(),
        )
    assert response.status_code == 400
    assert response.json()["error"] == (
        f"the body names tool 'jarvis.run.create' but was posted to /tools/{url_tool}; "
        "a call runs only the tool its URL names"
    )
    assert spy.plans == []


async def test_through_the_utcp_client_a_read_tool_cannot_run_a_command() -> None:
    """The python-utcp client calls `jarvis.run.get` with a `run.create` body: refused."""
    spy = SpyExecutor()
    async with live_server(make_service(spy)) as base:
        client = await utcp_client()
        try:
            registered = await client.register_manual(manual_template(base))
            assert registered.success, registered.errors
            urls = {t.name: t.tool_call_template.url for t in registered.manual.tools}
            with pytest.raises(Exception, match="400"):
                await client.call_tool(
                    "jarvis.run.get", call_args("jarvis.run.create", argv=["echo", "smuggled"])
                )
        finally:
            await client.close()
    assert urls == {name: f"{base}/tools/{name}" for name in urls}
    assert spy.plans == []


async def test_the_url_alone_names_the_tool_when_the_body_leaves_it_out() -> None:
    """`{"args": …}` posted to `/tools/jarvis.policy.check` is that tool's call."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.post(
            "/tools/jarvis.policy.check", json={"args": {"argv": ["echo"]}}, headers=auth()
        )
    assert response.status_code == 200
    assert response.json()["decision"] == "allow"


async def test_the_retired_shared_url_is_gone_and_says_where_each_tool_is_now() -> None:
    """`POST /tools/invoke` (the body chose the tool) is 410 and runs nothing."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        response = await h.client.post(
            "/tools/invoke", json=invoke_body("jarvis.run.create", argv=["echo"]), headers=auth()
        )
    assert response.status_code == 410
    assert "POST /tools/<tool name>" in response.json()["error"]
    assert spy.plans == []


async def test_an_unknown_tool_is_a_404_json_error() -> None:
    """A tool name jarvis does not serve answers 404 with the known names."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.invoke("jarvis.shell.exec", argv=["sh"])
    assert response.status_code == 404
    assert "jarvis.run.create" in response.json()["error"]


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"tool": "jarvis.run.create", "args": [], "extra": 1},
        {"tool": 7, "args": {}},
        {"tool": "jarvis.run.create", "args": []},
        {"tool": "jarvis.run.create", "args": {}},
        {"tool": "jarvis.run.create", "args": {"argv": []}},
        {"tool": "jarvis.run.create", "args": {"argv": [1]}},
        {"tool": "jarvis.run.create", "args": {"argv": ["echo\u0000"]}},
        {"tool": "jarvis.run.create", "args": {"argv": ["echo"], "cwd": "tmp"}},
        {"tool": "jarvis.run.create", "args": {"argv": ["echo"], "timeout_ms": 0}},
        {"tool": "jarvis.run.create", "args": {"argv": ["echo"], "timeout_ms": True}},
        {"tool": "jarvis.run.create", "args": {"argv": ["echo"], "shell": True}},
        {"tool": "jarvis.run.get", "args": {"run_id": "1"}},
    ],
)
async def test_malformed_calls_are_a_400_naming_the_field(body: object) -> None:
    """Wrong shapes and invalid arguments answer 400 with a message; nothing runs."""
    spy = SpyExecutor()
    async with harness(make_service(spy)) as h:
        response = await h.client.post(f"/tools/{tool_in(body)}", json=body, headers=auth())
    assert response.status_code == 400, response.text
    assert response.json()["error"]
    assert spy.plans == []


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({}, 'the body has no `args`: jarvis.run.create takes {"args": {argv, cwd?, '),
        ({"args": None}, '`args` must be a JSON object: jarvis.run.create takes {"args"'),
    ],
)
async def test_a_body_without_args_says_args_is_missing_not_argv(body: object, said: str) -> None:
    """No `args` is named as missing, with what the tool takes; `null` is said the same way."""
    async with harness(make_service(SpyExecutor())) as h:
        response = await h.client.post("/tools/jarvis.run.create", json=body, headers=auth())
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(said), response.text


def tool_in(body: object) -> str:
    """The tool a test body names, to post it to that tool's URL (run.create if none)."""
    tool = body.get("tool") if isinstance(body, dict) else None
    return tool if isinstance(tool, str) else "jarvis.run.create"
