"""Where a rootless server's cgroup jobs live, and the exact commands when none is delegated."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jigcmd.envelope import delegation
from jigcmd.envelope.delegation import DelegationError, choose_base


def test_a_hybrid_host_without_delegation_names_the_pid_to_move_not_dollar_dollar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`$$` typed into a root shell moves that shell: the pid of jigcmd's parent is printed."""
    monkeypatch.delenv("JIGCMD_CGROUP_BASE", raising=False)
    monkeypatch.setattr(delegation, "parent_process", lambda: (os.getppid(), "bash"))
    with pytest.raises(DelegationError) as refused:
        choose_base(None, mode="hybrid", root=str(tmp_path), euid=12345)
    said = str(refused.value)
    assert "$$" not in said
    assert f"echo {os.getppid()} > {tmp_path}/unified/jigcmd-u12345/cgroup.procs" in said
    assert f"pid {os.getppid()} started this jigcmd" in said


def test_a_server_outside_the_delegated_unified_cgroup_names_the_pid_to_move(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Delegated, but started outside `unified/jigcmd-u<uid>`: the same command, by pid."""
    (tmp_path / "unified" / "jigcmd-u12345").mkdir(parents=True)
    (tmp_path / "unified" / "elsewhere").mkdir()
    monkeypatch.setattr(delegation, "own_cgroup_v2", lambda: "/elsewhere")
    monkeypatch.setattr(delegation, "parent_process", lambda: (os.getppid(), "zsh"))
    with pytest.raises(DelegationError) as refused:
        delegation._require_inside_unified(str(tmp_path), "jigcmd-u12345")
    said = str(refused.value)
    assert "<its pid>" not in said
    assert f"echo {os.getppid()} > {tmp_path}/unified/jigcmd-u12345/cgroup.procs" in said


@pytest.mark.parametrize(("parent", "name"), [(0, ""), (1, "catatonit"), (4242, "sudo")])
def test_a_parent_that_ends_with_jigcmd_is_not_offered_as_the_pid_to_move(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parent: int, name: str
) -> None:
    """jigcmd as a container's pid 1, or under sudo: no pid to print; say which one to move."""
    monkeypatch.delenv("JIGCMD_CGROUP_BASE", raising=False)
    monkeypatch.setattr(delegation, "parent_process", lambda: (parent, name))
    with pytest.raises(DelegationError) as refused:
        choose_base(None, mode="hybrid", root=str(tmp_path), euid=12345)
    said = str(refused.value)
    assert f"echo {parent} >" not in said
    assert f"echo PID > {tmp_path}/unified/jigcmd-u12345/cgroup.procs, PID being the shell" in said


def test_the_parent_process_is_read_from_proc() -> None:
    """The pid and the command name of whoever started this test process."""
    parent, name = delegation.parent_process()
    assert parent == os.getppid()
    with open(f"/proc/{parent}/comm", encoding="utf-8") as comm:
        assert name == comm.read().strip()
