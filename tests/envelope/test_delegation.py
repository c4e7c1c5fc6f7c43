"""Where a rootless server's cgroup jobs live, and the exact commands when none is delegated."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jigcmd.envelope import delegation
from jigcmd.envelope.delegation import DelegationError, choose_base
from tests.required import require_root


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


def _scope(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, procs: list[int]) -> Path:
    """A fake delegated v2 scope owned by uid 12345, this process's own cgroup."""
    scope = tmp_path / "user.slice" / "run-r1.scope"
    scope.mkdir(parents=True)
    (scope / "cgroup.controllers").write_text("cpuset cpu memory pids\n", encoding="ascii")
    (scope / "cgroup.procs").write_text("".join(f"{p}\n" for p in procs), encoding="ascii")
    os.chown(scope, 12345, -1)
    monkeypatch.delenv("JIGCMD_CGROUP_BASE", raising=False)
    monkeypatch.setattr(delegation, "own_cgroup_v2", lambda: "/user.slice/run-r1.scope")
    return scope


def test_a_process_sharing_the_delegated_cgroup_is_named_and_nothing_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scope's shell stayed beside jigcmd: refused with its pid and name, the fix says to
    exec jigcmd, and no `jigcmd-server` leaf is made (an empty one left before goes)."""
    require_root("the fake scope is chowned to another uid")
    scope = _scope(tmp_path, monkeypatch, [os.getppid(), os.getpid()])
    (scope / "jigcmd-server").mkdir()
    with pytest.raises(DelegationError) as refused:
        choose_base(None, mode="v2", root=str(tmp_path), euid=12345)
    said = str(refused.value)
    parent = Path(f"/proc/{os.getppid()}/comm").read_text(encoding="ascii").strip()
    assert f"pid {os.getppid()} ({parent}) shares your delegated cgroup {scope}" in said
    assert f"pid {os.getpid()} " not in said
    assert "systemd-run --user --scope -p Delegate=yes jigcmd" in said and "exec" in said
    assert [p.name for p in scope.iterdir() if p.is_dir()] == []


def test_a_process_outside_the_pid_namespace_is_named_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel lists a process this pid namespace cannot see as pid 0."""
    require_root("the fake scope is chowned to another uid")
    _scope(tmp_path, monkeypatch, [0, os.getpid()])
    with pytest.raises(DelegationError, match="a process outside this pid namespace shares"):
        choose_base(None, mode="v2", root=str(tmp_path), euid=12345, move_self=False)


def test_jigcmd_alone_in_its_delegated_cgroup_moves_into_its_leaf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alone there, jigcmd writes its own pid into `<scope>/jigcmd-server` and uses `jigcmd`;
    a leaf made for a move that failed is removed."""
    require_root("the fake scope is chowned to another uid")
    scope = _scope(tmp_path, monkeypatch, [os.getpid()])
    # A plain directory has no cgroup.procs: the move fails, and the leaf made for it goes.
    with pytest.raises(OSError, match="cannot open for writing"):
        choose_base(None, mode="v2", root=str(tmp_path), euid=12345)
    assert not (scope / "jigcmd-server").exists()
    (scope / "jigcmd-server").mkdir()
    (scope / "jigcmd-server" / "cgroup.procs").touch()
    base = choose_base(None, mode="v2", root=str(tmp_path), euid=12345)
    assert base == str(scope / "jigcmd")
    leaf = scope / "jigcmd-server" / "cgroup.procs"
    assert leaf.read_text(encoding="ascii").strip() == str(os.getpid())


def test_a_delegated_cgroup_without_cpu_is_a_delegation_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """memory and pids delegated, cpu not: refused at start, as the delegation's fault."""
    require_root("the fake scope is chowned to another uid")
    scope = _scope(tmp_path, monkeypatch, [os.getpid()])
    (scope / "cgroup.controllers").write_text("memory pids\n", encoding="ascii")
    with pytest.raises(DelegationError) as refused:
        choose_base(None, mode="v2", root=str(tmp_path), euid=12345, move_self=False)
    said = str(refused.value)
    assert f"the delegated cgroup {scope} offers no cpu controller (it has: memory pids)" in said
    assert "Delegate=memory pids cpu" in said
    assert f"echo +cpu > {scope.parent}/cgroup.subtree_control" in said


def test_recovery_still_finds_a_delegation_that_could_host_no_new_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`jigcmd recover` only removes jobs: a scope its shell shares, or one without cpu, is
    still the user's delegated cgroup, and nothing is moved or made."""
    require_root("the fake scope is chowned to another uid")
    scope = _scope(tmp_path, monkeypatch, [os.getppid(), os.getpid()])
    (scope / "cgroup.controllers").write_text("memory pids\n", encoding="ascii")
    base = choose_base(
        None, mode="v2", root=str(tmp_path), euid=12345, move_self=False, for_jobs=False
    )
    assert base == str(scope / "jigcmd")
    assert [p.name for p in scope.iterdir() if p.is_dir()] == []
