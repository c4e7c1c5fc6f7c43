"""A tmpfs a killed test session left mounted is unmounted by the next session, never one
whose session still runs (seen from any pid namespace), never one nobody owns."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ownedmounts import OWNER_SUFFIX, fresh_point, mount_points, tmpfs
from tests.required import require_root

_ROOT = Path(__file__).parents[1]
# Holds an owned mount at argv[1] until its stdin closes, or it is killed.
_HOLDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tests.ownedmounts import tmpfs
    with tmpfs(Path(sys.argv[1]), "jigcmd-test", "size=64k"):
        print("mounted", flush=True)
        sys.stdin.read()
""")


@pytest.fixture(autouse=True)
def _as_root() -> None:
    require_root("mounting a tmpfs needs root")


@pytest.fixture
def killed_owner() -> Iterator[Path]:
    """The point of an owned mount whose owning process was killed (SIGKILL) holding it."""
    point = fresh_point("test")
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(point)],
        cwd=_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None
    assert holder.stdout.readline() == "mounted\n"
    holder.kill()
    holder.communicate()
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)
        for path in (point, point.with_name(point.name + OWNER_SUFFIX)):
            if path.is_dir():
                path.rmdir()
            path.unlink(missing_ok=True)


def _python(*argv: str, code: str) -> str:
    """What `code` prints, run by this Python under `argv` (an `unshare`) from the checkout."""
    done = subprocess.run(
        [*argv, sys.executable, "-c", code], cwd=_ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_the_next_session_sweeps_a_killed_owners_mount_and_keeps_a_live_one(
    killed_owner: Path,
) -> None:
    """A new pytest session (only collecting) unmounts the dead owner's; this one's stays."""
    with tmpfs(fresh_point("test"), "jigcmd-test", "size=64k") as mine:
        assert killed_owner in mount_points()
        session = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        subprocess.run([*session, __file__], cwd=_ROOT, capture_output=True, check=True)
        assert killed_owner not in mount_points() and mine in mount_points()
        assert not killed_owner.exists()
        assert not killed_owner.with_name(killed_owner.name + OWNER_SUFFIX).exists()
    assert mine not in mount_points() and not mine.exists()


def test_a_session_in_its_own_pid_namespace_keeps_a_live_sessions_mount() -> None:
    """The pid in the owner file means nothing there: the lock still says its owner lives."""
    with tmpfs(fresh_point("test"), "jigcmd-test", "size=64k") as mine:
        swept = _python(
            "unshare", "--fork", "--pid", "--mount-proc",
            code="from tests.ownedmounts import sweep_stale; print(sweep_stale())",
        )  # fmt: skip
        assert swept == "[]\n"
        assert mine in mount_points() and mine.is_dir()


def test_a_mount_without_an_owner_file_is_never_swept() -> None:
    """Nothing says whose it is: it stays, even with a jigcmd- source (a private namespace's)."""
    point = fresh_point("test")
    point.mkdir()
    try:
        kept = _python(
            "unshare", "--mount", "--propagation", "private",
            code=textwrap.dedent(f"""
                from pathlib import Path
                from jigcmd.envelope import syscalls as sc
                from tests.ownedmounts import mount_points, sweep_stale
                sc.mount("jigcmd-test", "{point}", "tmpfs", 0, "size=64k")
                print(sweep_stale(), Path("{point}") in mount_points())
            """),
        )  # fmt: skip
        assert kept == "[] True\n"
    finally:
        point.rmdir()
