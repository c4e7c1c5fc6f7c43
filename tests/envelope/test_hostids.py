"""Host id leases: each live envelope's ids are its own, across processes, until let go."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jigcmd.envelope import hostids
from tests.required import unavailable

pytestmark = pytest.mark.envelope

# Two ids at the top of the range, for the tests that fill it (live envelopes skip them too).
_PAIR = (hostids.RANGE[0] + hostids.RANGE[1] - 2, 2)


@pytest.fixture(autouse=True)
def _as_root() -> None:
    if os.geteuid() != 0:
        unavailable("needs root: rootless, every envelope is the server's own user")


def test_jarvis_runs_keep_uid_65534_and_lease_nothing() -> None:
    """Jarvis's runs (profile "host") keep uid 65534, with no lease."""
    assert hostids.take("host") == hostids.HostIds(65534, 65534, -1)


def test_two_leases_are_two_ids_of_the_range_each_a_file_until_let_go() -> None:
    """Leased ids differ, lie in the range, and their files go with the lease."""
    first, second = hostids.take("candidate"), hostids.take("candidate")
    try:
        assert first.uid != second.uid
        for ids in (first, second):
            assert ids.uid == ids.gid
            assert hostids.RANGE[0] <= ids.uid < sum(hostids.RANGE)
            assert (Path(hostids.DIRECTORY) / str(ids.uid)).exists()
    finally:
        hostids.let_go(first)
        hostids.let_go(second)
    assert not (Path(hostids.DIRECTORY) / str(first.uid)).exists()
    assert not (Path(hostids.DIRECTORY) / str(second.uid)).exists()


def test_an_id_another_process_holds_is_not_taken_and_a_full_range_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another server's lease (another process) is skipped; with none left, a clear refusal."""
    monkeypatch.setattr(hostids, "_chosen", _PAIR)
    mine = hostids.take("candidate")
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys\nfrom jigcmd.envelope import hostids\n"
            f"hostids._chosen = {_PAIR!r}\n"
            "ids = hostids.take('candidate')\nprint(ids.uid, flush=True)\nsys.stdin.read()\n"
            "hostids.let_go(ids)\n"
        )],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        theirs = int(holder.stdout.readline())
        assert {mine.uid, theirs} == set(range(_PAIR[0], sum(_PAIR)))
        with pytest.raises(hostids.HostIdError, match="is leased"):
            hostids.take("candidate")
    finally:
        holder.communicate("")
        hostids.let_go(mine)
    # Let go of by both: each id can be leased again.
    again = hostids.take("candidate"), hostids.take("candidate")
    for ids in again:
        hostids.let_go(ids)
    assert {ids.uid for ids in again} == set(range(_PAIR[0], sum(_PAIR)))


def test_recover_removes_a_killed_holders_lease_file_and_keeps_a_held_one(tmp_path: Path) -> None:
    """A killed zygote's lease file (unlocked) goes with `jigcmd recover`; a live lease stays."""
    killed = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys\nfrom jigcmd.envelope import hostids\n"
            "print(hostids.take('candidate').uid, flush=True)\nsys.stdin.read()\n"
        )],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert killed.stdout is not None
    left = Path(hostids.DIRECTORY) / killed.stdout.readline().strip()
    killed.kill()
    killed.communicate()
    held = hostids.take("candidate")
    (tmp_path / "state").mkdir(mode=0o700)
    try:
        assert left.exists()
        done = subprocess.run(
            [sys.executable, "-m", "jigcmd", "recover", "--state-dir", str(tmp_path / "state")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert not left.exists(), done.stderr
        assert (Path(hostids.DIRECTORY) / str(held.uid)).exists()
    finally:
        hostids.let_go(held)


# Run under `unshare --mount`: a tmpfs of its own over the lease directory, strays in it.
_STRAYS = textwrap.dedent("""
    import os, subprocess, sys
    from jigcmd.envelope import hostids
    from jigcmd.envelope import syscalls as sc
    os.makedirs(hostids.DIRECTORY, exist_ok=True)
    sc.mount("jigcmd-test", hostids.DIRECTORY, "tmpfs", 0, "mode=0755")
    live = hostids.take("candidate")
    first, count = hostids.lease_range()
    def near(step): return str(first + (live.uid - first + step) % count)
    for name in ("²", f"0{live.uid}", "١٩١٢٦٠٢٦٢٤", "not-an-id", "12", near(9)):
        open(os.path.join(hostids.DIRECTORY, name), "w").close()
    os.mkdir(os.path.join(hostids.DIRECTORY, near(7)))
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "recover", "--state-dir", sys.argv[1]],
        capture_output=True, text=True,
    )
    left = set(os.listdir(hostids.DIRECTORY))
    expected = {"²", f"0{live.uid}", "١٩١٢٦٠٢٦٢٤", "not-an-id", "12", near(7), str(live.uid)}
    print(done.returncode, left == expected, sorted(left ^ expected), done.stdout, done.stderr)
""")


def test_recover_sweeps_only_lease_names_and_goes_past_what_it_cannot_lock(
    tmp_path: Path,
) -> None:
    """Names no lease has stay (a live lease's file too); a directory is skipped, not fatal."""
    (tmp_path / "state").mkdir(mode=0o700)
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private",
         sys.executable, "-c", _STRAYS, str(tmp_path / "state")],
        cwd=Path(__file__).parents[2], capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.startswith("0 True []"), done.stdout
    assert "tidied: 1 host id lease file no process held" in done.stdout, done.stdout
    assert "left in place: host id lease: lease /run/jigcmd/hostids/" in done.stdout, done.stdout
