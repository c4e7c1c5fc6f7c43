"""Every front opens its state directory and cgroups through `durable.host`."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from jigcmd.durable.host import open_host, state_directory
from jigcmd.envelope.cgroups import detect

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
def test_a_front_that_tolerates_no_cgroups_gets_the_reason_and_no_backend(tmp_path: Path) -> None:
    """serve and run go on without cgroups (every command then fails closed); others raise."""
    host = open_host(tmp_path / "state", "/jigcmd-absolute", tolerate_no_cgroups=True)
    assert host.backend is None
    assert host.cgroup_base == "/jigcmd-absolute"
    assert host.cgroup_problem is not None and "relative" in host.cgroup_problem
    with pytest.raises(ValueError, match="relative"):
        open_host(tmp_path / "state", "/jigcmd-absolute")


def test_a_front_gets_the_backend_and_the_base_it_resolved(tmp_path: Path) -> None:
    """With cgroups at hand: the prepared state directory, the backend and its base."""
    host = open_host(tmp_path / "state", None, move_self=False)
    assert host.state_dir == tmp_path / "state"
    assert host.backend is not None and host.cgroup_problem is None
    assert host.cgroup_base
