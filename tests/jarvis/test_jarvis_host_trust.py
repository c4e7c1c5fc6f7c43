"""A policy directory others may write (search_path, host_dirs, an argv0's): refused at start.

Another user who may write a directory a rule's program resolves in puts their own file
there, and jarvis runs it as itself; so jarvis refuses to start, and the doctor says the
same, naming the directory, its owner and mode, and the fix (`jigcmd/jarvis/hosttrust.py`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.jarvis.hosttrust import untrusted_dir
from tests.jarvis.doctorline import jarvis_policy_check
from tests.required import require_root

_TOKEN_ENV = {"JARVIS_BEARER_TOKEN": "jv_test-token-0123456789abcdef"}
_RULE = '[[rule]]\nname = "prog"\ndecision = "allow"\nargv0 = ["jigcmdt-prog"]\n'


def _dir(path: Path, mode: int) -> Path:
    path.mkdir()
    path.chmod(mode)
    return path


def test_a_world_writable_directory_is_refused_even_when_sticky(tmp_path: Path) -> None:
    """The sticky bit stops others renaming entries, not adding a program: both refused."""
    euid = os.geteuid()
    for name, mode in (("open", 0o777), ("sticky", 0o1777), ("group", 0o775)):
        why = untrusted_dir(str(_dir(tmp_path / name, mode)), euid)
        assert why is not None
        assert f"{tmp_path / name} is writable by group or others" in why, why
        assert f"mode {mode:04o}" in why, why


def test_a_private_directory_in_a_sticky_one_is_trusted_and_in_an_open_one_is_not(
    tmp_path: Path,
) -> None:
    """Under a sticky parent no one else can rename ours away; under a 0777 one anyone can."""
    euid = os.geteuid()
    sticky = _dir(tmp_path / "sticky", 0o1777)
    assert untrusted_dir(str(_dir(sticky / "tools", 0o755)), euid) is None
    assert untrusted_dir(str(sticky / "tools" / "not-yet"), euid) is None
    opened = _dir(tmp_path / "open", 0o777)
    why = untrusted_dir(str(_dir(opened / "tools", 0o755)), euid)
    assert why is not None
    assert f"{opened} above it is writable by group or others" in why, why


def test_a_link_to_a_writable_directory_is_judged_at_its_target(tmp_path: Path) -> None:
    """`bin -> shared`: the link's own directory is ours, its target 0777 is refused."""
    shared = _dir(tmp_path / "shared", 0o777)
    (tmp_path / "bin").symlink_to("shared")
    why = untrusted_dir(str(tmp_path / "bin"), os.geteuid())
    assert why is not None
    assert f"{shared} is writable by group or others" in why, why


def test_a_directory_another_user_owns_is_refused(tmp_path: Path) -> None:
    """Its owner may chmod it and write there at will, whatever its mode now."""
    require_root("giving a directory to another user needs root")
    other = _dir(tmp_path / "theirs", 0o755)
    os.chown(other, 65534, 65534)
    why = untrusted_dir(str(other), os.geteuid())
    assert why is not None
    assert f"{other} is owned by neither root nor uid {os.geteuid()}" in why, why
    assert "owner uid 65534" in why, why


@pytest.fixture
def shared() -> Iterator[Path]:
    """A sticky world-writable directory outside /tmp, which host_dirs may not name."""
    directory = Path(tempfile.mkdtemp(prefix="jigcmd-test-trust-", dir="/var/tmp"))
    try:
        yield _dir(directory / "shared", 0o1777)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _start(policy: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "jigcmd", "jarvis", "--policy", str(policy),
            "--port", "0", "--state-dir", str(tmp_path / "state"),
        ],
        env={**os.environ, **_TOKEN_ENV},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("key", ["search_path", "host_dirs", "argv0"])
def test_jarvis_refuses_to_start_naming_the_directory_its_owner_mode_and_the_fix(
    tmp_path: Path, shared: Path, key: str
) -> None:
    """Exit 2 and one line; nothing served; the state directory not even made."""
    policy = tmp_path / "policy.toml"
    lines = {
        "search_path": f'search_path = ["{shared}", "/usr/bin"]\n' + _RULE,
        "host_dirs": f'search_path = ["/usr/bin"]\nhost_dirs = ["/usr", "{shared}"]\n' + _RULE,
        "argv0": _RULE.replace('"jigcmdt-prog"', f'"{shared}/jigcmdt-prog"'),
    }
    policy.write_text(lines[key])
    done = _start(policy, tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert f"{key}" in line, line
    assert f"{shared} is writable by group or others (owner uid {os.geteuid()}" in line, line
    assert "mode 1777" in line, line
    assert "List only directories that root or uid" in line, line
    assert not (tmp_path / "state").exists()


@pytest.mark.envelope
def test_the_doctor_told_the_policy_fails_it_in_jarviss_words(tmp_path: Path) -> None:
    """`doctor --jarvis-policy`: a failed `jarvis policy` line naming the directory."""
    shared = _dir(tmp_path / "shared", 0o777)
    policy = tmp_path / "policy.toml"
    policy.write_text(f'search_path = ["{shared}"]\n' + _RULE)
    check = jarvis_policy_check(tmp_path, policy)
    assert check["status"] == "FAIL", check
    assert f"search_path: {shared}: {shared} is writable by group or others" in check["detail"]
