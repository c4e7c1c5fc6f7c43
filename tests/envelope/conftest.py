"""Fixtures for tests that need the real machine: root, cgroups, network namespaces.

Locally such a test skips with the reason when the machine cannot run it; under `CI` it fails
instead, because CI must prove the envelope for real (`tests.required`).
"""

from __future__ import annotations

import os
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.cgroups import CgroupBackend, CgroupUnavailable, detect
from jigcmd.envelope.native import NativeExecutor
from tests.envelope.hostile_harness import TracedExecutor, file_sha256
from tests.required import require_root, require_runtime, unavailable, usable_cgroups

_PR_SET_CHILD_SUBREAPER = 36


def in_stand_in(body: Callable[[int], None]) -> bytes:
    """Run `body(report_fd)` in a forked stand-in supervisor; what it and its children wrote.

    The stand-in is a subreaper like a real supervisor, so the test process itself never
    changes namespaces, groups or subreaper status. A failure of the stand-in shows in the
    test's output and fails the test.
    """
    report_r, report_w = os.pipe()
    stand_in = os.fork()
    if stand_in == 0:
        code = 1
        try:
            os.close(report_r)
            sc.prctl(_PR_SET_CHILD_SUBREAPER, 1)
            body(report_w)
            code = 0
        except BaseException:  # noqa: BLE001 - a forked stand-in reports and exits, never returns
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(report_w)
    data = b""
    while chunk := os.read(report_r, 4096):
        data += chunk
    os.close(report_r)
    assert os.waitstatus_to_exitcode(os.waitpid(stand_in, 0)[1]) == 0
    return data


@pytest.fixture
def real_cgroups() -> CgroupBackend:
    """The machine's cgroup backend, with nothing missing."""
    return usable_cgroups()


@pytest.fixture
def job_name(request: pytest.FixtureRequest) -> Iterator[str]:
    """A unique job name; whatever a test leaves under it is killed and removed afterwards."""
    name = f"jigcmd-test-{uuid.uuid4().hex[:12]}"
    yield name
    if os.geteuid() != 0:
        return
    try:
        backend = detect()
    except (CgroupUnavailable, ValueError):
        return
    job = backend.open(name)
    if job is not None:
        job.kill()
        job.wait_empty(5.0)
        job.remove()


@pytest.fixture
def real_netns() -> None:
    """Root and a kernel with network namespaces."""
    require_root()
    if not os.path.exists("/proc/self/ns/net"):
        unavailable("the kernel has no network namespaces")


@pytest.fixture(scope="module")
async def envelope(anyio_backend: str) -> AsyncIterator[TracedExecutor]:
    """One running `NativeExecutor` per module, traced; afterwards nothing of it may remain."""
    backend = usable_cgroups()
    runtime = require_runtime()
    bun_before = file_sha256(runtime.path)
    executor = NativeExecutor()
    executor.stage_at_start(runtime.binds)
    await executor.start()
    traced = TracedExecutor(executor, backend)
    try:
        yield traced
    finally:
        await executor.aclose()
    # Processes were checked after each run, while namespace inodes could not be reused yet.
    assert not traced.jobs_left(), "job cgroups left after the executor closed"
    assert file_sha256(runtime.path) == bun_before, "the Bun binary changed"
