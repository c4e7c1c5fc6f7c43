"""A tmpfs a killed test session left mounted is unmounted by the next session, never one
whose session still runs, never one nobody owns."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

from jigcmd.envelope import syscalls as sc
from tests.ownedmounts import OWNER_SUFFIX, identity, mount_points, sweep_stale, tmpfs
from tests.required import require_root


def _gone_identity() -> str:
    """The identity of a process that has since exited."""
    child = subprocess.Popen(["sleep", "60"])
    recorded = identity(child.pid)
    child.kill()
    child.wait()
    assert recorded is not None
    return recorded


def test_a_mount_whose_owner_is_gone_is_swept_and_a_live_ones_is_kept(tmp_path: Path) -> None:
    """The dead owner's point is unmounted and removed with its owner file; ours stays."""
    require_root("mounting a tmpfs needs root")
    mine, left = tmp_path / "jigcmd-mine", tmp_path / "jigcmd-left"
    with tmpfs(mine, "jigcmd-test", "size=64k"), tmpfs(left, "jigcmd-test", "size=64k"):
        (tmp_path / f"jigcmd-left{OWNER_SUFFIX}").write_text(_gone_identity())
        assert sweep_stale() == [left]
        assert mine in mount_points() and left not in mount_points()
        assert not left.exists() and not (tmp_path / f"jigcmd-left{OWNER_SUFFIX}").exists()
        assert (tmp_path / f"jigcmd-mine{OWNER_SUFFIX}").exists()
    assert mine not in mount_points() and not mine.exists()


def test_a_mount_without_an_owner_file_is_never_swept(tmp_path: Path) -> None:
    """Nothing says whose it is: it stays, even with a jigcmd- source."""
    require_root("mounting a tmpfs needs root")
    point = tmp_path / f"jigcmd-unowned-{uuid.uuid4().hex[:8]}"
    point.mkdir()
    sc.mount("jigcmd-test", str(point), "tmpfs", 0, "size=64k")
    try:
        assert sweep_stale() == []
        assert point in mount_points()
    finally:
        sc.umount2(str(point), sc.MNT_DETACH)
