"""The MCP protocol versions jigcmd serves, by era, and what each version's messages carry.

Two eras share one process: the handshake era (`initialize` fixes a version for the
session, 2024-11-05 … 2025-11-25) and the per-request era (2026-07-28: every request names
its version and capabilities in `_meta`, and `server/discover` replaces the handshake).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ANNOTATED",
    "HANDSHAKE_VERSIONS",
    "LATEST_VERSION",
    "MODERN_VERSION",
    "MODERN_VERSIONS",
    "STRUCTURED",
    "SUPPORTED_VERSIONS",
    "negotiate_version",
]

LATEST_VERSION: Final = "2025-11-25"
# Every handshake version negotiated, newest first: a client's own version is answered when
# listed. (`SUPPORTED_VERSIONS` is the older name, kept for its importers.)
HANDSHAKE_VERSIONS: Final = (LATEST_VERSION, "2025-06-18", "2025-03-26", "2024-11-05")
SUPPORTED_VERSIONS: Final = HANDSHAKE_VERSIONS
# The per-request revision, and every one served (a request naming another is -32022).
MODERN_VERSION: Final = "2026-07-28"
MODERN_VERSIONS: Final = (MODERN_VERSION,)
# Versions with `structuredContent` and `outputSchema` (and tool `title`s); before them the
# evidence travels as JSON text.
STRUCTURED: Final = frozenset({MODERN_VERSION, LATEST_VERSION, "2025-06-18"})
# Versions with tool `annotations` (`readOnlyHint`, …).
ANNOTATED: Final = STRUCTURED | {"2025-03-26"}


def negotiate_version(params: object) -> str:
    """The protocol version to answer `initialize` with: the client's if supported, else ours."""
    requested = params.get("protocolVersion") if type(params) is dict else None
    return requested if requested in HANDSHAKE_VERSIONS else LATEST_VERSION
