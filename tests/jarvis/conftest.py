"""Fixtures the jarvis suites that run real envelopes share."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jigcmd.envelope.native import NativeExecutor
from tests.required import usable_cgroups


@pytest.fixture(scope="module")
async def executor(anyio_backend: str) -> AsyncIterator[NativeExecutor]:
    """A started `NativeExecutor`, or skip (fail under CI) when the machine cannot run one."""
    usable_cgroups()
    native = NativeExecutor()
    await native.start()
    try:
        yield native
    finally:
        await native.aclose()
