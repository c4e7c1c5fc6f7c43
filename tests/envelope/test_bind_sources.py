"""Bind sources behind directories the envelope's own uid cannot search still reach the root."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.command.runtime import BUN_TARGET, find_runtime
from jigcmd.envelope.native import NativeExecutor
from jigcmd.policy.planner import candidate_plan
from tests.required import require_root

pytestmark = pytest.mark.envelope


@pytest.fixture
async def executor() -> AsyncIterator[NativeExecutor]:
    require_root()
    native = NativeExecutor()
    await native.start()
    try:
        yield native
    finally:
        await native.aclose()


async def test_a_runtime_under_a_private_directory_runs(
    executor: NativeExecutor, tmp_path: Path
) -> None:
    """A Bun copy under a 0700 directory (like a venv in /root) is bound and runs."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)
    bun = private / "bun"
    shutil.copy2(find_runtime().path, bun)
    runtime = find_runtime(str(bun))
    plan = candidate_plan(
        bun=BUN_TARGET,
        runtime_binds=runtime.binds,
        kind="run",
        paths=("main.ts",),
        args=(),
        files=(("main.ts", 'console.log("ran")'),),
        stdin="",
        deadline=time.monotonic() + 10,
    )
    outcome = await executor.execute(plan, CancelSignal())
    assert (outcome.exit_code, outcome.stdout.data) == (0, b"ran\n")
