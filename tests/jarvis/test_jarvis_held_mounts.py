"""A policy whose host_dirs hold a mount: jarvis refuses to start, and the doctor says so.

No run could be shown such a directory (the kernel binds it only with its mounts), so every
allowed run would fail at run time; the refusal comes at start, in one line naming the
directory, the mount and the fix. The mount below is a tmpfs the test makes and removes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.envelope import syscalls as sc
from jigcmd.jarvis.hostmounts import held_mounts
from tests.ownedmounts import tmpfs
from tests.required import require_root

_SAFE = 'host_dirs = ["/usr", "/bin", "/sbin", "/lib", "/lib64"]'


def test_a_mount_strictly_below_a_host_dir_is_found_at_its_real_path() -> None:
    """/bin -> usr/bin is judged as /usr/bin; a mount at the directory itself is no problem."""
    points = ["/", "/etc", "/etc/hostname", "/usr/bin/x", "/srv"]
    real = {"/bin": "/usr/bin"}.get
    found = held_mounts(["/etc", "/bin", "/srv", "/lib"], points, lambda p: real(p) or p)
    assert found == [("/etc", "/etc/hostname"), ("/bin", "/usr/bin/x")]


@pytest.fixture
def held() -> Iterator[tuple[Path, Path]]:
    """A directory with a tmpfs mounted below it: (the directory, the mount point)."""
    require_root("mounting a tmpfs below a host directory needs root")
    # Outside /tmp, which a policy may not name (the envelope's own scratch is there).
    directory = Path(tempfile.mkdtemp(prefix="jigcmd-test-held-", dir="/var/tmp"))
    point = directory / "inner"
    try:
        with tmpfs(point, "jigcmd-test-held", "size=64k", sc.MS_NOSUID | sc.MS_NODEV):
            yield directory, point
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _policy(tmp_path: Path, directory: Path) -> Path:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        f'host_dirs = ["/usr", "{directory}"]\n'
        '[[rule]]\nname = "echo"\ndecision = "allow"\nargv0 = ["/usr/bin/echo"]\n'
    )
    return policy


def test_jarvis_refuses_to_start_naming_the_directory_the_mount_and_the_fix(
    tmp_path: Path, held: tuple[Path, Path]
) -> None:
    """Exit 2 and one stderr line; nothing served."""
    directory, point = held
    done = subprocess.run(
        [
            sys.executable, "-m", "jigcmd", "jarvis", "--policy", str(_policy(tmp_path, directory)),
            "--port", "0", "--state-dir", str(tmp_path / "state"),
        ],
        env={**os.environ, "JARVIS_BEARER_TOKEN": "jv_test-token-0123456789abcdef"},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert f"{directory} holds a mount ({point})" in line, line
    assert _SAFE in line, line
    assert "serving" not in line


@pytest.mark.envelope
def test_the_doctor_told_the_policy_says_the_same(tmp_path: Path, held: tuple[Path, Path]) -> None:
    """`doctor --jarvis-policy`: a failed `jarvis policy` line with jarvis's own words."""
    directory, point = held
    done = subprocess.run(
        [
            sys.executable, "-m", "jigcmd", "doctor", "--json", "--state-dir",
            str(tmp_path / "state"), "--jarvis-policy", str(_policy(tmp_path, directory)),
        ],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    check = {c["check"]: c for c in json.loads(done.stdout)}["jarvis policy"]
    assert check["status"] == "FAIL", check
    assert f"{directory} holds a mount ({point})" in check["detail"], check
    assert _SAFE in check["detail"], check
