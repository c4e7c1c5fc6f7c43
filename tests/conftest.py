"""What every test shares: the one event loop backend the product runs on, and a machine
without the tmpfs mounts an earlier, killed session left behind."""

from __future__ import annotations

import os

import pytest

from tests.ownedmounts import sweep_stale


def pytest_sessionstart(session: pytest.Session) -> None:
    """Unmount our tmpfs mounts whose session was killed before it could (tests/ownedmounts)."""
    if os.geteuid() == 0:
        sweep_stale()


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """asyncio only (uvicorn and the MCP SDK run there); one loop per module for its fixtures."""
    return "asyncio"
