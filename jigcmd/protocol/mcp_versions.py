"""The MCP protocol versions jigcmd negotiates, and what each version's messages carry."""

from __future__ import annotations

from typing import Final

__all__ = ["ANNOTATED", "LATEST_VERSION", "STRUCTURED", "SUPPORTED_VERSIONS", "negotiate_version"]

LATEST_VERSION: Final = "2025-11-25"
# Every version negotiated, newest first: a client's own version is answered when listed.
SUPPORTED_VERSIONS: Final = (LATEST_VERSION, "2025-06-18", "2025-03-26", "2024-11-05")
# Versions with `structuredContent` and `outputSchema` (and tool `title`s); before them the
# evidence travels as JSON text.
STRUCTURED: Final = frozenset({LATEST_VERSION, "2025-06-18"})
# Versions with tool `annotations` (`readOnlyHint`, …).
ANNOTATED: Final = STRUCTURED | {"2025-03-26"}


def negotiate_version(params: object) -> str:
    """The protocol version to answer `initialize` with: the client's if supported, else ours."""
    requested = params.get("protocolVersion") if type(params) is dict else None
    return requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION
