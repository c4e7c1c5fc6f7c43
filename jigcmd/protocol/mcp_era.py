"""The per-request era of MCP (2026-07-28): the `_meta` envelope, its checks, result stamps.

A request claims the per-request era by carrying `io.modelcontextprotocol/protocolVersion`
or `…/clientCapabilities` in `params._meta`. A claim is checked on every request, never
inferred from earlier ones: a missing or malformed version or capabilities object is
-32602, a version this server does not serve is -32022 with `{supported, requested}`.
Results of the era carry `resultType` and the server's identity under
`io.modelcontextprotocol/serverInfo`; jigcmd's own `_meta` keys take the reverse-DNS prefix
`dev.jigcmd/` there (the handshake era keeps `jigcmd/`, which its clients read).
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec

from jigcmd.errors import bounded
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.mcp_versions import MODERN_VERSIONS

__all__ = [
    "CLIENT_CAPABILITIES_META",
    "HANDSHAKE_ONLY",
    "LOG_LEVELS",
    "MISSING_CAPABILITY",
    "OPERATION_ID_META",
    "PROTOCOL_VERSION_META",
    "RESOURCE_LISTS_TTL_MS",
    "RESOURCE_TTL_MS",
    "SERVER_INFO_META",
    "SESSION_METHODS",
    "TASKS_EXTENSION",
    "TOOLS_TTL_MS",
    "UNSUPPORTED_VERSION",
    "Envelope",
    "EnvelopeError",
    "RequestKeys",
    "claims_envelope",
    "discover_result",
    "missing_tasks_capability",
    "modern_meta_key",
    "modern_result",
    "read_envelope",
    "read_request_keys",
    "unsupported_version",
    "without_envelope",
]

PROTOCOL_VERSION_META: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META: Final = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_META: Final = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_META: Final = "io.modelcontextprotocol/logLevel"
SERVER_INFO_META: Final = "io.modelcontextprotocol/serverInfo"
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
# The caller's own key for a tool call (both eras): a retry with it replays the recorded end.
OPERATION_ID_META: Final = "dev.jigcmd/operationId"
# The two error codes the revision defines for this server's answers (both in its range).
MISSING_CAPABILITY: Final = -32021
UNSUPPORTED_VERSION: Final = -32022
# The methods an initialized MCP session serves (besides ping); before `initialize` they are
# -32600, any other method -32601 (`mcp.py`; here so the session's table needs no `mcp`).
SESSION_METHODS: Final = frozenset(
    {"tools/list", "tools/call", "resources/read", "resources/list", "resources/templates/list"}
)
LOG_LEVELS: Final = frozenset(
    {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}
)
# The tool catalogue is fixed for the process; a client may keep it this long.
TOOLS_TTL_MS: Final = 60_000
DISCOVER_TTL_MS: Final = 60_000
# A kept resource's bytes never change (its URI names one operation's capture), so a read
# stays fresh for a day, the TypeScript SDK's ceiling on `ttlMs`; pruning it later only
# makes it unreadable, never different. The resource lists are fixed like the catalogue.
RESOURCE_TTL_MS: Final = 86_400_000
RESOURCE_LISTS_TTL_MS: Final = 60_000
_CLAIM_KEYS: Final = (PROTOCOL_VERSION_META, CLIENT_CAPABILITIES_META)
# Methods of the handshake era only: in the per-request era they do not exist.
HANDSHAKE_ONLY: Final = frozenset({"initialize", "ping", "logging/setLevel"})
_LEGACY_PREFIX: Final = "jigcmd/"
_MODERN_PREFIX: Final = "dev.jigcmd/"
# W3C Trace Context: version 00 (or a later one, read the same way), never all-zero ids.
_TRACEPARENT: Final = re.compile(
    r"[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}"
)
_TRACESTATE_MAX: Final = 512


class Envelope(msgspec.Struct, frozen=True):
    """What one per-request-era request declares about itself."""

    version: str
    # Whether this request's capabilities declare the Tasks extension.
    tasks: bool
    log_level: str | None


class EnvelopeError(msgspec.Struct, frozen=True):
    """Why a request's envelope was refused: the JSON-RPC error to answer with."""

    code: int
    message: str
    data: object = None

    def frame(self, request_id: jsonrpc.Id) -> bytes:
        """The error response to `request_id`."""
        return jsonrpc.encode_error(request_id, self.code, self.message, self.data)


class RequestKeys(msgspec.Struct, frozen=True):
    """The `_meta` members of a tool call that jigcmd keeps (both eras)."""

    operation_id: str | None = None
    traceparent: str | None = None
    tracestate: str | None = None

    def trace(self) -> dict[str, str]:
        """The trace context as it is handed back (`traceparent`, `tracestate` when given)."""
        kept = {"traceparent": self.traceparent, "tracestate": self.tracestate}
        return {key: value for key, value in kept.items() if value is not None}


def _meta_of(params: object) -> dict[str, Any] | None:
    if type(params) is not dict:
        return None
    meta = params.get("_meta")
    return meta if type(meta) is dict else None


def claims_envelope(params: object) -> bool:
    """Whether a request claims the per-request era (either envelope key in `_meta`)."""
    meta = _meta_of(params)
    return meta is not None and any(key in meta for key in _CLAIM_KEYS)


def unsupported_version(requested: str, *, message: str = "") -> EnvelopeError:
    """-32022 naming the versions served and the one requested."""
    supported = list(MODERN_VERSIONS)
    return EnvelopeError(
        UNSUPPORTED_VERSION,
        message
        or f"Unsupported protocol version {requested!r}; this server serves "
        + ", ".join(supported),
        # The peer's own text, echoed: bounded as the message is.
        {"supported": supported, "requested": bounded(requested)},
    )


def missing_tasks_capability(method: str) -> EnvelopeError:
    """-32021: a Tasks method from a request whose capabilities do not declare the extension."""
    return EnvelopeError(
        MISSING_CAPABILITY,
        f"Missing required client capability: {method} needs the {TASKS_EXTENSION} extension "
        "in this request's clientCapabilities",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def without_envelope(method: str, params: object) -> EnvelopeError:
    """A request without the envelope in a per-request process (-32601 for `ping` and kin)."""
    if method in HANDSHAKE_ONLY:
        return EnvelopeError(
            jsonrpc.METHOD_NOT_FOUND,
            f"Method not found: {method} (this process serves MCP {MODERN_VERSIONS[0]} per "
            "request since its first such call)",
        )
    if params is not None and type(params) is not dict:
        # An array has no `_meta` to miss: what is wrong is its shape, as the handshake era says.
        return _invalid(f"{method} params must be an object")
    return _invalid(
        f"_meta[{PROTOCOL_VERSION_META!r}] and _meta[{CLIENT_CAPABILITIES_META!r}] are "
        f"required on every request of MCP {MODERN_VERSIONS[0]}"
    )


def _invalid(message: str) -> EnvelopeError:
    return EnvelopeError(jsonrpc.INVALID_PARAMS, f"Invalid params: {message}")


def read_envelope(params: object) -> Envelope | EnvelopeError:
    """Check a claiming request's version and capabilities (each request on its own)."""
    meta = _meta_of(params)
    assert meta is not None, "only a request that claims the era is read"
    version = meta.get(PROTOCOL_VERSION_META)
    if type(version) is not str:
        return _invalid(f"_meta[{PROTOCOL_VERSION_META!r}] is required and must be a string")
    if version not in MODERN_VERSIONS:
        return unsupported_version(version)
    capabilities = meta.get(CLIENT_CAPABILITIES_META)
    if type(capabilities) is not dict:
        return _invalid(
            f"_meta[{CLIENT_CAPABILITIES_META!r}] is required and must be an object "
            "({} declares none)"
        )
    extensions = capabilities.get("extensions")
    if extensions is not None and type(extensions) is not dict:
        return _invalid(f"_meta[{CLIENT_CAPABILITIES_META!r}].extensions must be an object")
    info = meta.get(CLIENT_INFO_META)
    if info is not None and type(info) is not dict:
        return _invalid(f"_meta[{CLIENT_INFO_META!r}] must be an object")
    level = meta.get(LOG_LEVEL_META)
    if level is not None and level not in LOG_LEVELS:
        return _invalid(f"_meta[{LOG_LEVEL_META!r}] must be one of {', '.join(sorted(LOG_LEVELS))}")
    tasks = extensions is not None and type(extensions.get(TASKS_EXTENSION)) is dict
    return Envelope(version=version, tasks=tasks, log_level=level)


def read_request_keys(params: object) -> RequestKeys | EnvelopeError:
    """The caller's operation key and trace context from `_meta` (absent ones are None).

    A malformed operation key is -32602; an invalid `traceparent` is dropped, as W3C Trace
    Context asks (a vendor never fails a request over it), and `tracestate` with it.
    """
    meta = _meta_of(params)
    if meta is None:
        return RequestKeys()
    operation_id = meta.get(OPERATION_ID_META)
    if operation_id is not None and not jsonrpc.is_run1_id(operation_id):
        return _invalid(
            f"_meta[{OPERATION_ID_META!r}] must match [A-Za-z0-9][A-Za-z0-9._:/-]* (1-128 bytes)"
        )
    parent = meta.get("traceparent")
    if type(parent) is not str or _TRACEPARENT.fullmatch(parent) is None:
        return RequestKeys(operation_id=operation_id)
    state = meta.get("tracestate")
    if type(state) is not str or len(state) > _TRACESTATE_MAX:
        state = None
    return RequestKeys(operation_id=operation_id, traceparent=parent, tracestate=state)


def modern_meta_key(key: str) -> str:
    """jigcmd's own `_meta` key as the per-request era names it (`dev.jigcmd/…`)."""
    if key.startswith(_LEGACY_PREFIX):
        return _MODERN_PREFIX + key[len(_LEGACY_PREFIX) :]
    return key


def modern_result(
    result: dict[str, Any], server_info: dict[str, str], *, result_type: str = "complete"
) -> dict[str, Any]:
    """A result as the per-request era sends it: `resultType`, the server's identity, own keys."""
    stamped = dict(result)
    meta = {modern_meta_key(key): value for key, value in result.get("_meta", {}).items()}
    meta[SERVER_INFO_META] = server_info
    stamped["_meta"] = meta
    stamped["resultType"] = result_type
    return stamped


def discover_result(server_info: dict[str, str], instructions: str) -> dict[str, Any]:
    """The `server/discover` result: the versions served, tools and the Tasks extension."""
    return modern_result(
        {
            "supportedVersions": list(MODERN_VERSIONS),
            "capabilities": {
                "tools": {"listChanged": False},
                # Each run's streams and report, linked from its result, read by URI.
                "resources": {"subscribe": False, "listChanged": False},
                "extensions": {TASKS_EXTENSION: {}},
            },
            "instructions": instructions,
            # The catalogue and instructions come from this operator's Binding.
            "cacheScope": "private",
            "ttlMs": DISCOVER_TTL_MS,
        },
        server_info,
    )
