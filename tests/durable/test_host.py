"""Every front opens its state directory and cgroups through `durable.host`."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from jigcmd.durable.host import open_host, state_directory
from jigcmd.envelope.cgroups import detect
from jigcmd.envelope.delegation import DelegationError

pytestmark = pytest.mark.envelope


def _hybrid_or_v1() -> bool:
    try:
        return detect().mode in ("v1", "hybrid")
    except OSError:
        return False


def test_the_state_directory_is_prepared_private(tmp_path: Path) -> None:
    """The explicit directory is made, 0700, and returned as given."""
    state = state_directory(tmp_path / "state")
    assert state == tmp_path / "state"
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700


@pytest.mark.skipif(not _hybrid_or_v1(), reason="an absolute base is refused only on v1")
@pytest.mark.parametrize("tolerant", [True, False])
def test_a_base_that_cannot_be_one_here_is_refused_by_every_front(
    tmp_path: Path, tolerant: bool
) -> None:
    """An operator's impossible base is a configuration error: no front starts without cgroups
    on it (serve and run, which go on when the host has no cgroups, included)."""
    with pytest.raises(DelegationError, match="relative to each hierarchy"):
        open_host(tmp_path / "state", "/jigcmd-absolute", tolerate_no_cgroups=tolerant)


def test_a_front_gets_the_backend_and_the_base_it_resolved(tmp_path: Path) -> None:
    """With cgroups at hand: the prepared state directory, the backend and its base."""
    host = open_host(tmp_path / "state", None, move_self=False)
    assert host.state_dir == tmp_path / "state"
    assert host.backend is not None and host.cgroup_problem is None
    assert host.cgroup_base
