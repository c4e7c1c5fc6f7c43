"""What another user plants on the state directory's path between its check and its making."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from jigcmd.durable import statepath
from jigcmd.durable.statedir import StateDirError, prepare_state_dir
from tests.required import require_root

# A uid no test process runs as (what it "plants" is only chowned to it).
_OTHER = 61_999


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root("needs root: what another user plants is chowned to them")


def _planting(monkeypatch: pytest.MonkeyPatch, plant: Callable[[], None]) -> None:
    """`plant` run right after the path is judged and before anything is made: the race won."""
    judged = statepath.walk

    def walk_then_plant(path: Path, *, to_make: bool) -> statepath.Walked:
        walked = judged(path, to_make=to_make)
        if walked.missing:
            plant()
        return walked

    monkeypatch.setattr(statepath, "walk", walk_then_plant)


def _sticky_and_victim(tmp_path: Path) -> tuple[Path, Path]:
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o755)
    return sticky, victim


def test_a_link_planted_in_tmp_after_the_check_is_never_followed_to_make_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`/tmp/race -> victim` appearing where the check saw nothing: root makes no `victim/a`."""
    sticky, victim = _sticky_and_victim(tmp_path)
    race = sticky / "race"

    def plant() -> None:
        race.symlink_to(victim)
        os.lchown(race, _OTHER, _OTHER)

    _planting(monkeypatch, plant)
    with pytest.raises(StateDirError) as caught:
        prepare_state_dir(race / "a" / "state")
    assert caught.value.reason == (
        f"{race}, on the state directory's path, became a symbolic link or a non-directory "
        "as it was made (nothing was made through it)"
    )
    assert caught.value.fix is not None and caught.value.fix.startswith(f"remove {race} if")
    assert os.listdir(victim) == []


def test_another_users_writable_directory_planted_after_the_check_gets_nothing_made_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their own 0777 directory where the check saw nothing is judged before going below."""
    sticky, _ = _sticky_and_victim(tmp_path)
    theirs = sticky / "race"

    def plant() -> None:
        theirs.mkdir()
        theirs.chmod(0o777)
        os.chown(theirs, _OTHER, _OTHER)

    _planting(monkeypatch, plant)
    with pytest.raises(StateDirError, match=rf"{theirs} in it is uid {_OTHER}.s"):
        prepare_state_dir(theirs / "a" / "state")
    assert os.listdir(theirs) == []


def test_a_group_writable_directory_another_maker_left_gets_nothing_made_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even root's: a directory others may write is refused as a parent before use."""
    shared = tmp_path / "a"

    def plant() -> None:
        shared.mkdir()
        shared.chmod(0o777)

    _planting(monkeypatch, plant)
    with pytest.raises(StateDirError, match=f"{shared}, on the state directory's path, is wr"):
        prepare_state_dir(shared / "b" / "state")
    assert os.listdir(shared) == []
