"""Fixtures for tests that need the real machine: root, cgroups, network namespaces.

Locally such a test skips with the reason when the machine cannot run it; under `CI` it fails
instead, because CI must prove the envelope for real (`tests.required`).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from jigcmd.command.runtime import find_runtime
from jigcmd.envelope.cgroups import CgroupBackend, CgroupJob, CgroupUnavailable, detect
from jigcmd.envelope.native import NativeExecutor
from jigcmd.plan import Limits
from tests.envelope.hostile_harness import TracedExecutor, file_sha256
from tests.envelope.hostile_runner import Hostile, HostServices
from tests.required import require_root, require_runtime, unavailable, usable_cgroups


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
def fresh_job(real_cgroups: CgroupBackend, job_name: str) -> CgroupJob:
    """A fresh job of this host's backend (`job_name` removes it afterwards)."""
    return real_cgroups.create(job_name, Limits())


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


@pytest.fixture(scope="module")
def hostile(envelope: TracedExecutor) -> Hostile:
    """The module's hostile runner."""
    return Hostile(envelope, find_runtime())


@pytest.fixture
def host_services(tmp_path: Path) -> Iterator[HostServices]:
    """Fresh host listeners, closed afterwards."""
    tcp = socket.create_server(("127.0.0.1", 0))
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"jigcmd-test-{uuid.uuid4().hex[:12]}"
    abstract.bind("\0" + name)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = str(tmp_path / "jigcmd.sock")
    unix.bind(path)
    for listener in (tcp, abstract, unix):
        listener.listen(16)
        listener.setblocking(False)
    yield HostServices(tcp, abstract, unix, name, path)
    for listener in (tcp, abstract, unix):
        listener.close()
