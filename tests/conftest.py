"""What every test shares: the one event loop backend the product runs on."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio only (uvicorn and the MCP SDK run there); one loop per module for its fixtures."""
    return "asyncio"
