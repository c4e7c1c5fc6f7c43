"""The hostile suite's device cases where the zygote cannot make device nodes (no CAP_MKNOD).

Rootless, or as root under `setpriv --bounding-set -mknod`, `mknod` is refused and the
envelope's /dev/null, /dev/zero and /dev/urandom are binds of the host's: the host's own
inodes. The zygote here runs under that very `setpriv`, so the fallback is what is tested.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
from collections.abc import AsyncIterator

import pytest

from jigcmd.command.runtime import find_runtime
from jigcmd.envelope.native import NativeExecutor
from tests.envelope import hostile_candidates as cand
from tests.envelope.hostile_harness import TracedExecutor
from tests.envelope.hostile_runner import Hostile, refused
from tests.required import require_root, require_runtime, unavailable, usable_cgroups

pytestmark = [
    pytest.mark.envelope,
    pytest.mark.skipif(platform.machine() != "x86_64", reason="raw system call numbers"),
]


@pytest.fixture(scope="module")
async def envelope(
    anyio_backend: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[TracedExecutor]:
    """A `NativeExecutor` whose zygote runs without CAP_MKNOD in its bounding set."""
    require_root()
    backend = usable_cgroups()
    require_runtime()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        unavailable("setpriv (util-linux) is missing")
    python = tmp_path_factory.mktemp("nomknod") / "python"
    python.write_text(f'#!/bin/sh\nexec {setpriv} --bounding-set -mknod {sys.executable} "$@"\n')
    python.chmod(0o755)
    executor = NativeExecutor(python=str(python))
    await executor.start()
    traced = TracedExecutor(executor, backend)
    try:
        yield traced
    finally:
        await executor.aclose()
    assert not traced.jobs_left(), "job cgroups left after the executor closed"


@pytest.fixture(scope="module")
def hostile(envelope: TracedExecutor) -> Hostile:
    """The module's hostile runner, on the executor without CAP_MKNOD."""
    return Hostile(envelope, find_runtime())


async def test_a_candidate_cannot_change_the_host_dev_null_through_its_bind(
    hostile: Hostile,
) -> None:
    """The bind is read-only: utimensat and chmod are EROFS, the host's times stay; writing
    /dev/null and reading /dev/zero and /dev/urandom still work."""
    before = os.stat("/dev/null")
    case = await hostile.run(cand.DEVICE_TIMES)
    # The fallback ran: the envelope's /dev/null is the host's inode.
    assert case.attempts["identity null"].detail == f"{before.st_dev}:{before.st_ino}"
    refused(case, "utimensat /dev/null", "EROFS")
    refused(case, "chmod /dev/null", "EROFS")
    assert case.attempts["write /dev/null"].detail == "written"
    assert case.attempts["read /dev/zero"].detail == "16"
    assert case.attempts["read /dev/urandom"].detail == "16"
    after = os.stat("/dev/null")
    assert (after.st_mtime_ns, after.st_ctime_ns, after.st_mode) == (
        before.st_mtime_ns,
        before.st_ctime_ns,
        before.st_mode,
    )
