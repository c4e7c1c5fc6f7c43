"""The official python-utcp client, set up for jarvis as its docs show it."""

from __future__ import annotations

from typing import Any

from utcp.data.auth_implementations.api_key_auth import ApiKeyAuth  # type: ignore[import-untyped]
from utcp.utcp_client import UtcpClient  # type: ignore[import-untyped]
from utcp_http.http_call_template import HttpCallTemplate  # type: ignore[import-untyped]

from tests.jarvis.jarvis_harness import TOKEN

__all__ = ["body", "manual_template", "utcp_client"]


async def utcp_client() -> UtcpClient:
    """A client holding the token under the name the `jarvis` manual reads it by."""
    # Variables are namespaced by the manual name: `jarvis` + `_` + the variable.
    return await UtcpClient.create(config={"variables": {"jarvis_JARVIS_BEARER_TOKEN": TOKEN}})


def manual_template(base: str) -> HttpCallTemplate:
    """The `jarvis` manual at `base`, its bearer token from the client's variables."""
    return HttpCallTemplate(
        name="jarvis",
        url=f"{base}/utcp",
        http_method="GET",
        auth=ApiKeyAuth(
            api_key="Bearer ${JARVIS_BEARER_TOKEN}", var_name="Authorization", location="header"
        ),
    )


def body(tool: str, **args: Any) -> dict[str, Any]:
    """The `call_tool` arguments of one `POST /tools/<tool>` body."""
    return {"body": {"tool": tool, "args": args}}
