"""The state directory: defaults per user, creation mode, and refusal of unsafe directories."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from jigcmd.durable.statedir import (
    StateDirError,
    default_state_dir,
    existing_state_dir,
    prepare_state_dir,
)


def test_root_defaults_to_var_lib() -> None:
    """Root's default is /var/lib/jigcmd whatever the environment says."""
    assert default_state_dir(euid=0, environ={"XDG_STATE_HOME": "/x"}) == Path("/var/lib/jigcmd")


@pytest.mark.parametrize("euid", [0, 1000])
def test_jigcmd_state_dir_names_the_directory_for_everyone(euid: int) -> None:
    """$JIGCMD_STATE_DIR wins over root's and the XDG defaults (a host's env can set it)."""
    environ = {"JIGCMD_STATE_DIR": "/srv/jigcmd", "XDG_STATE_HOME": "/s", "HOME": "/h"}
    assert default_state_dir(euid=euid, environ=environ) == Path("/srv/jigcmd")


def test_an_empty_jigcmd_state_dir_is_unset() -> None:
    """JIGCMD_STATE_DIR= leaves the default in place."""
    assert default_state_dir(euid=0, environ={"JIGCMD_STATE_DIR": ""}) == Path("/var/lib/jigcmd")


def test_other_users_default_to_xdg_state_home() -> None:
    """A user with XDG_STATE_HOME gets a jigcmd directory inside it."""
    got = default_state_dir(euid=1000, environ={"XDG_STATE_HOME": "/s", "HOME": "/h"})
    assert got == Path("/s/jigcmd")


def test_a_relative_xdg_state_home_is_ignored_for_the_home_fallback() -> None:
    """XDG says relative values are invalid: the fallback ~/.local/state/jigcmd applies."""
    got = default_state_dir(euid=1000, environ={"XDG_STATE_HOME": "rel", "HOME": "/h"})
    assert got == Path("/h/.local/state/jigcmd")


def test_a_new_directory_is_created_private(tmp_path: Path) -> None:
    """A missing directory (and its parents) is created, the directory itself 0700."""
    path = prepare_state_dir(tmp_path / "a" / "state")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700


def test_a_group_writable_directory_is_refused_with_the_fix(tmp_path: Path) -> None:
    """A group- or world-writable directory is refused, naming its mode and the chmod."""
    path = tmp_path / "state"
    path.mkdir()
    path.chmod(0o770)
    with pytest.raises(StateDirError, match=r"writable by group or others \(mode 0770\).*chmod"):
        prepare_state_dir(path)


def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    """A directory owned by someone else is refused, naming the owner."""
    if os.geteuid() != 0:
        pytest.skip("changing a directory's owner needs root")
    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    os.chown(path, 65534, 65534)
    with pytest.raises(StateDirError, match="owned by uid 65534"):
        prepare_state_dir(path)


def test_a_file_in_the_way_is_refused(tmp_path: Path) -> None:
    """A regular file where the directory should be is refused."""
    path = tmp_path / "state"
    path.write_text("")
    with pytest.raises(StateDirError, match="not a directory"):
        prepare_state_dir(path)


def test_a_missing_directory_to_read_from_is_refused_and_not_created(tmp_path: Path) -> None:
    """A mistyped path: refused naming it, and neither it nor its parents appear."""
    path = tmp_path / "typo" / "state"
    with pytest.raises(StateDirError, match=r"typo/state does not exist \(nothing was created\)"):
        existing_state_dir(path, holding="journal.sqlite3")
    assert not (tmp_path / "typo").exists()


def test_a_directory_to_read_from_without_its_journal_is_refused(tmp_path: Path) -> None:
    """An existing directory that never held a journal: refused, and still empty."""
    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    with pytest.raises(StateDirError, match=r"holds no journal\.sqlite3: nothing was recorded"):
        existing_state_dir(path, holding="journal.sqlite3")
    assert list(path.iterdir()) == []


def test_a_directory_to_read_from_is_checked_like_one_to_write(tmp_path: Path) -> None:
    """Ours, private, holding its journal: returned absolute; group-writable: refused."""
    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    (path / "journal.sqlite3").touch()
    assert existing_state_dir(path, holding="journal.sqlite3") == path
    path.chmod(0o770)
    with pytest.raises(StateDirError, match="writable by group or others"):
        existing_state_dir(path, holding="journal.sqlite3")
