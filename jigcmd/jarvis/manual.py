"""The UTCP 1.x manual served at `GET /utcp`. Pure.

Each tool is called over HTTP at a URL of its own: `POST <base>/tools/<name>`, which performs
that tool and no other (a body naming another is refused), so that a host exposing only some
tools to a model can rely on each call doing what its tool says. The request body is taken
from the tool argument `body` (`body_field`), shaped `{"tool": <name>, "args": {...}}`,
authorised by `Authorization: Bearer ${JARVIS_BEARER_TOKEN}`. The token is a variable the
UTCP client substitutes, never a literal: python-utcp prefixes it with the name the client
registered the manual under (`jarvis` → `jarvis_JARVIS_BEARER_TOKEN`, each `_` of that name
doubled). The manual lists only the tools the server's grants allow: a client never
discovers a tool it would be refused.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from jigcmd import __version__
from jigcmd.jarvis.tools import TOOLS, ToolSpec, tool_path

__all__ = ["MANUAL_NAME", "UTCP_VERSION", "base_url", "build_manual"]

UTCP_VERSION = "1.0.1"
MANUAL_NAME = "jarvis"


def base_url(host: str, port: int) -> str:
    """`http://host:port`, with IPv6 literals bracketed."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def build_manual(base: str, grants: Collection[str]) -> dict[str, Any]:
    """The manual for a server reachable at `base`: the tools `grants` allow, in order."""
    return {
        "utcp_version": UTCP_VERSION,
        "manual_version": __version__,
        "tools": [_tool(spec, base) for spec in TOOLS.values() if spec.capability in grants],
    }


def _tool(spec: ToolSpec, base: str) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": spec.description,
        "inputs": {
            "type": "object",
            "required": ["body"],
            "properties": {
                "body": {
                    "type": "object",
                    "description": f'The request body: {{"tool": "{spec.name}", "args": {{...}}}}',
                    "required": ["tool", "args"],
                    "additionalProperties": False,
                    "properties": {
                        "tool": {"type": "string", "enum": [spec.name]},
                        "args": spec.inputs,
                    },
                }
            },
        },
        "outputs": spec.outputs,
        "tags": ["jarvis", spec.capability, *spec.name.split(".")[1:2]],
        "tool_call_template": {
            "name": MANUAL_NAME,
            "call_template_type": "http",
            "http_method": "POST",
            "url": base + tool_path(spec.name),
            "content_type": "application/json",
            "body_field": "body",
            "auth": {
                "auth_type": "api_key",
                "api_key": "Bearer ${JARVIS_BEARER_TOKEN}",
                "var_name": "Authorization",
                "location": "header",
            },
        },
    }
