"""The staged runtime: copied while the zygote starts, in its namespace only, gone with it."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from jigcmd.command.runtime import BUN_TARGET, find_runtime
from jigcmd.envelope.api import EnvelopeFailure
from jigcmd.envelope.native import NativeExecutor
from tests.required import require_root

pytestmark = pytest.mark.envelope


async def _size(path: str | os.PathLike[str]) -> int:
    """The size of the file at `path`, read off the event loop."""
    return (await anyio.Path(path).stat()).st_size


async def test_the_runtime_is_staged_before_the_first_plan_and_never_on_the_host() -> None:
    """Once `start` returns the zygote's namespace holds a read-only copy of every runtime file;
    the host sees an empty mount point, which the executor removes when it closes."""
    require_root()
    runtime = find_runtime()
    executor = NativeExecutor()
    executor.stage_at_start(runtime.binds)
    await executor.start()
    try:
        zygote = executor._zygote
        staging_dir = executor._staging_dir
        assert zygote is not None and staging_dir is not None
        seen = f"/proc/{zygote.pid}/root{staging_dir}"
        for bind in runtime.binds:
            copy = seen + bind.target
            assert await _size(copy) == await _size(bind.source), bind
            assert os.statvfs(copy).f_flag & os.ST_RDONLY, bind
        assert await _size(seen + BUN_TARGET) == await _size(runtime.path)
        mountinfo = await anyio.Path(f"/proc/{zygote.pid}/mountinfo").read_text("utf-8")
        mounts = [line for line in mountinfo.splitlines() if f" {staging_dir} " in line]
        assert len(mounts) == 1 and " - tmpfs jigcmd-runtime ro," in mounts[0], mounts
        assert os.listdir(staging_dir) == []
    finally:
        await executor.aclose()
    assert not await anyio.Path(staging_dir).exists()


@pytest.mark.parametrize("kind", ["link", "fifo"])
async def test_a_mount_point_that_is_no_directory_is_refused_not_mounted_through(
    tmp_path: Path, kind: str
) -> None:
    """`<state>/runtime -> elsewhere` (made after the start's checks): the zygote refuses it
    by name instead of mounting its tmpfs over the link's target."""
    require_root()
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if kind == "link":
        (state / "runtime").symlink_to(elsewhere)
    else:
        os.mkfifo(state / "runtime", 0o600)
    executor = NativeExecutor(state_dir=str(state))
    executor.stage_at_start(find_runtime().binds)
    what = "a symbolic link" if kind == "link" else "not a directory"
    try:
        with pytest.raises(EnvelopeFailure) as caught:
            await executor.start()
    finally:
        await executor.aclose()
    assert f"staging at {state}/runtime: it is {what}; remove it" in str(caught.value)
