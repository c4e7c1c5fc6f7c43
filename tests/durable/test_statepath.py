"""The state directory's path, component by component (`jigcmd.durable.statepath`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jigcmd.durable.statedir import (
    StateDirError,
    checked_state_dir,
    prepare_state_dir,
    unmade_state_dir,
)
from jigcmd.durable.statepath import trusted_path
from jigcmd.journal.failures import JournalUnusable
from jigcmd.journal.store import Journal
from tests.faults.disk import required_disk
from tests.required import require_root

# A uid no test process runs as (the files are only chowned to it, nothing runs as it).
_OTHER = 61_999


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root("needs root: files are chowned to another uid")


def test_a_parent_another_user_owns_is_refused_naming_it_its_owner_and_mode(
    tmp_path: Path,
) -> None:
    """Its owner could rename `state` and put a link in its place."""
    parent = tmp_path / "theirs"
    parent.mkdir(mode=0o755)
    os.chown(parent, _OTHER, _OTHER)
    with pytest.raises(StateDirError) as caught:
        trusted_path(parent / "state", create=True)
    assert f"{parent}, on the state directory's path, is owned by uid {_OTHER} (mode 0755)" in (
        caught.value.reason
    )
    assert not (parent / "state").exists()  # nothing made below it


def test_a_group_writable_parent_is_refused_with_the_chmod_that_fixes_it(tmp_path: Path) -> None:
    """Not sticky: anyone in the group may replace what is in it."""
    parent = tmp_path / "shared"
    parent.mkdir()
    parent.chmod(0o775)
    (parent / "state").mkdir(mode=0o700)
    with pytest.raises(StateDirError) as caught:
        trusted_path(parent / "state", create=False)
    assert "is writable by group or others (owner uid 0, mode 0775)" in caught.value.reason
    assert caught.value.fix is not None and f"chmod go-w {parent}" in caught.value.fix


def test_a_sticky_world_writable_parent_is_accepted_only_for_a_component_of_ours(
    tmp_path: Path,
) -> None:
    """Like /tmp: ours in it is safe (no one else may rename it); another user's is not."""
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    assert trusted_path(sticky / "mine", create=True) == sticky / "mine"
    theirs = sticky / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, _OTHER, _OTHER)
    with pytest.raises(
        StateDirError,
        match=rf"mode 1777\) and .*theirs in it is uid {_OTHER}.s, neither root.s nor this user.s",
    ) as caught:
        trusted_path(theirs / "state", create=True)
    # The entry is at fault, never the shared directory's mode: chmod go-w /tmp would take
    # /tmp from every other user.
    assert caught.value.fix is not None
    # Nor is it this user's to take over: it names whose it is and asks for one of their own.
    assert caught.value.fix.startswith(f"{theirs} is another user's: leave it")
    assert "use a state directory of your own" in caught.value.fix
    assert "chmod" not in caught.value.fix
    assert "chown" not in caught.value.fix


def test_a_link_in_a_trusted_directory_is_followed_and_its_target_checked(
    tmp_path: Path,
) -> None:
    """`/var/lib/jigcmd -> /srv/jigcmd` works (the resolved path is used); a target under
    another user's directory does not."""
    real = tmp_path / "srv" / "jigcmd"
    real.mkdir(parents=True, mode=0o700)
    (tmp_path / "link").symlink_to(real)
    assert prepare_state_dir(tmp_path / "link") == real
    theirs = tmp_path / "theirs"
    (theirs / "jigcmd").mkdir(parents=True, mode=0o700)
    os.chown(theirs, _OTHER, _OTHER)
    (tmp_path / "bad").symlink_to(theirs / "jigcmd")
    with pytest.raises(StateDirError, match=f"{theirs}, on the state directory's path, is owned"):
        prepare_state_dir(tmp_path / "bad")


def test_dot_dot_after_a_link_is_taken_from_the_links_target_as_the_kernel_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ok/ln/../s` with `ok/ln -> deep/a` is `deep/s` for the shell and the kernel; collapsing
    `..` as text first would use `ok/s`, another directory than the one the operator means."""
    (tmp_path / "deep" / "a").mkdir(parents=True)
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "ln").symlink_to(tmp_path / "deep" / "a")
    assert prepare_state_dir(tmp_path / "ok" / "ln" / ".." / "s") == tmp_path / "deep" / "s"
    assert not (tmp_path / "ok" / "s").exists()
    monkeypatch.chdir(tmp_path / "ok")
    assert checked_state_dir(Path("ln/../s")) == tmp_path / "deep" / "s"


def test_a_path_refused_below_a_group_writable_directory_makes_nothing_in_it(
    tmp_path: Path,
) -> None:
    """The whole path is judged first: no `state` is left in the untrusted directory."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    for _ in range(2):
        with pytest.raises(StateDirError, match="shared, on the state directory's path, is wr"):
            prepare_state_dir(shared / "state" / "jigcmd")
    assert os.listdir(shared) == []


def test_a_missing_directory_left_again_with_dot_dot_is_never_made(tmp_path: Path) -> None:
    """`nonex/../s` is `s`: nothing below `nonex` could be a link, so `..` is read as written."""
    assert prepare_state_dir(tmp_path / "nonex" / ".." / "s") == tmp_path / "s"
    assert sorted(os.listdir(tmp_path)) == ["s"]


def test_whether_a_missing_state_dir_could_be_made_is_judged_without_making_it(
    tmp_path: Path,
) -> None:
    """What doctor asks: the first directory serve would make, or serve's refusal."""
    assert unmade_state_dir(tmp_path / "a" / "b") == tmp_path / "a"
    assert unmade_state_dir(tmp_path) is None
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared").chmod(0o777)
    with pytest.raises(StateDirError, match="is writable by group or others"):
        unmade_state_dir(tmp_path / "shared" / "state")
    (tmp_path / "sticky").mkdir()
    (tmp_path / "sticky").chmod(0o1777)
    assert unmade_state_dir(tmp_path / "sticky" / "state") == tmp_path / "sticky" / "state"
    assert sorted(os.listdir(tmp_path)) == ["shared", "sticky"]
    assert os.listdir(tmp_path / "shared") == os.listdir(tmp_path / "sticky") == []


def test_missing_parents_are_made_0755_and_the_state_dir_0700(tmp_path: Path) -> None:
    """Made only below components that passed, whatever the umask lets through."""
    old = os.umask(0o002)
    try:
        made = prepare_state_dir(tmp_path / "a" / "b" / "state")
    finally:
        os.umask(old)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o755
    assert made.stat().st_mode & 0o777 == 0o700


def test_a_live_dir_others_may_write_is_refused_at_start(tmp_path: Path) -> None:
    """Sub-directories are checked as the state directory is, naming what to do."""
    state = tmp_path / "state"
    (state / "live").mkdir(parents=True)
    state.chmod(0o700)
    (state / "live").chmod(0o777)
    with pytest.raises(StateDirError) as caught:
        prepare_state_dir(state)
    assert caught.value.reason == f"{state}/live is writable by group or others (mode 0777)"
    assert caught.value.fix is not None and f"remove {state}/live" in caught.value.fix


def test_a_fifo_where_the_journal_belongs_is_refused_instead_of_waited_on(tmp_path: Path) -> None:
    """Every verb that opens the journal would block on it for ever."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.mkfifo(state / "journal.sqlite3", 0o600)
    # The directory is sound; the journal's own open words what is wrong with its file.
    checked_state_dir(state)
    with pytest.raises(JournalUnusable) as caught:
        Journal.open(state)
    assert "journal.sqlite3: is a FIFO (named pipe), not a regular file" in str(caught.value)


def test_a_missing_directory_left_with_dot_dot_needs_no_right_to_make_it(tmp_path: Path) -> None:
    """`ro/nonex/../s` with `s` there makes nothing, so `ro` may be read-only; `ro/new` may not."""
    with required_disk() as disk:
        (disk.path / "s").mkdir(mode=0o700)
        disk.read_only()
        assert unmade_state_dir(disk.path / "nonex" / ".." / "s") is None
        assert prepare_state_dir(disk.path / "nonex" / ".." / "s") == disk.path / "s"
        with pytest.raises(StateDirError) as caught:
            unmade_state_dir(disk.path / "new")
        assert caught.value.reason == (
            f"state directory {disk.path / 'new'} cannot be created: Read-only file system"
        )
