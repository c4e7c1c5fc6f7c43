"""Fixtures for the tests that run inside the pure cgroup v2 VM (see `scripts/v2vm.py`).

The guest is built for these tests, so anything missing is a failure, never a skip.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jigcmd.command.runtime import RuntimeUnavailable, find_runtime
from jigcmd.envelope.cgroups import CgroupUnavailable, detect
from jigcmd.envelope.cgroups.v2 import V2Backend
from jigcmd.envelope.native import NativeExecutor
from tests.envelope.hostile_harness import TracedExecutor


@pytest.fixture(scope="module")
def v2() -> V2Backend:
    """The machine's cgroup backend, which must be the pure v2 one with nothing missing."""
    try:
        backend = detect()
    except (CgroupUnavailable, ValueError) as e:
        pytest.fail(f"no usable cgroups in the v2 VM: {e}", pytrace=False)
    if not isinstance(backend, V2Backend):
        pytest.fail(f"detected {backend.mode}, not v2: is this the v2 VM?", pytrace=False)
    problems = backend.problems()
    assert not problems, problems
    return backend


@pytest.fixture(scope="module")
async def envelope(v2: V2Backend) -> AsyncIterator[TracedExecutor]:
    """A running `NativeExecutor`, traced; afterwards none of its jobs or processes remain."""
    try:
        find_runtime()
    except RuntimeUnavailable as e:
        pytest.fail(str(e), pytrace=False)
    executor = NativeExecutor()
    executor.stage_at_start(find_runtime().binds)
    await executor.start()
    traced = TracedExecutor(executor, v2)
    try:
        yield traced
    finally:
        await executor.aclose()
    # Processes were checked after each run, while namespace inodes could not be reused yet.
    assert not traced.jobs_left(), "job cgroups left after the executor closed"
