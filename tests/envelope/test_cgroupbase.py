"""What a cgroup base is on each host kind, and a v1 or hybrid delegation's missing pieces."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from jigcmd.envelope import cgroupbase
from jigcmd.envelope.cgroupbase import base_problem, configured_base, delegated_step
from jigcmd.envelope.delegation import DelegationError, choose_base

ROOT = "/sys/fs/cgroup"
HYBRID = ("memory", "pids", "cpu", "unified")


def test_the_variable_is_the_base_when_no_option_is_given() -> None:
    """The option wins; the variable is named as the source, so a refusal names it."""
    environ = {"JIGCMD_CGROUP_BASE": "jigcmd-u1001"}
    assert configured_base(None, environ) == ("jigcmd-u1001", "$JIGCMD_CGROUP_BASE")
    assert configured_base("other", environ) == ("other", "--cgroup-base")
    assert configured_base(None, {}) is None


@pytest.mark.parametrize("mode", ["hybrid", "v1"])
def test_an_absolute_base_on_a_v1_or_hybrid_host_is_refused_with_the_name_it_meant(
    mode: str,
) -> None:
    """One path names one hierarchy: the refusal says what a base is here and the name."""
    problem = base_problem(f"{ROOT}/unified/jigcmd-u1001", "$JIGCMD_CGROUP_BASE", mode, ROOT)
    assert problem is not None
    why, fix = problem
    assert "is an absolute path" in why
    assert "a directory name relative to each hierarchy" in why
    assert fix == "set $JIGCMD_CGROUP_BASE to jigcmd-u1001"
    rooted = base_problem("/jigcmd-u1001", "--cgroup-base", mode, ROOT)
    assert rooted is not None and rooted[1] == "set --cgroup-base to jigcmd-u1001"
    assert base_problem("jigcmd-u1001", "--cgroup-base", mode, ROOT) is None


def test_a_v2_base_must_be_inside_the_cgroup2_mount() -> None:
    """Absolute inside the mount, or relative to it; elsewhere, or climbing out, is refused."""
    assert base_problem(f"{ROOT}/user.slice/x.scope", "--cgroup-base", "v2", ROOT) is None
    assert base_problem("jigcmd", "--cgroup-base", "v2", ROOT) is None
    outside = base_problem("/tmp/jigcmd", "--cgroup-base", "v2", ROOT)
    assert outside is not None and "outside the cgroup2 mount" in outside[0]
    climbing = base_problem("a/../../etc", "--cgroup-base", "v2", ROOT)
    assert climbing is not None and "'..'" in climbing[0]


def test_a_base_chowned_without_r_names_its_cgroup_procs() -> None:
    """The directories are the user's, the files in them root's: said so, fixed by chown -R."""
    owners = {c: (1001, 1001) for c in HYBRID} | {"unified": (1001, 0)}
    step = delegated_step(1001, "jigcmd-u1001", ROOT, "hybrid", owners)
    assert step is not None
    assert (
        f"{ROOT}/unified/jigcmd-u1001/cgroup.procs (and the files beside it) belong to uid 0: "
        "the directory was chowned without -R"
    ) in step.why
    assert step.command.startswith("for c in unified; do mkdir -p")
    assert f"chown -R 1001 {ROOT}/$c/jigcmd-u1001" in step.command


def test_another_users_subtree_is_not_handed_over() -> None:
    """uid 1003 pointed at uid 1001's subtree: use your own, never chown theirs."""
    owners = {c: (1001, 1001) for c in HYBRID}
    step = delegated_step(1003, "jigcmd-u1001", ROOT, "hybrid", owners)
    assert step is not None
    assert f"{ROOT}/memory/jigcmd-u1001 belongs to uid 1001" in step.why
    assert step.before.startswith(
        "jigcmd-u1001 is uid 1001's, not yours: use your own jigcmd-u1003"
    )
    assert "jigcmd-u1001" not in step.command
    assert f"chown -R 1003 {ROOT}/$c/jigcmd-u1003" in step.command


def test_every_hierarchy_is_checked_not_only_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pids missing: refused at start naming it and the one mkdir, not at every call."""
    monkeypatch.delenv("JIGCMD_CGROUP_BASE", raising=False)
    for controller in ("memory", "cpu", "unified"):
        (tmp_path / controller / "jigcmd-u12345").mkdir(parents=True)
        (tmp_path / controller / "jigcmd-u12345" / "cgroup.procs").touch()
    monkeypatch.setattr(cgroupbase, "_owner", _owned_by(12345))
    with pytest.raises(DelegationError) as refused:
        choose_base(None, mode="hybrid", root=str(tmp_path), euid=12345)
    said = str(refused.value)
    assert f"{tmp_path}/pids/jigcmd-u12345 is missing" in said
    assert "for c in pids; do mkdir -p" in said


def test_a_missing_nested_base_is_refused_with_its_mkdir_not_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`jigcmd-u<uid>/sub` with no sub: refused as the doctor refuses it, nothing made."""
    for controller in HYBRID:
        (tmp_path / controller / "jigcmd-u12345").mkdir(parents=True)
    monkeypatch.setenv("JIGCMD_CGROUP_BASE", "jigcmd-u12345/sub")
    monkeypatch.setattr(cgroupbase, "_owner", _owned_by(12345))
    with pytest.raises(DelegationError) as refused:
        choose_base(None, mode="hybrid", root=str(tmp_path), euid=12345)
    assert f"mkdir -p {tmp_path}/$c/jigcmd-u12345/sub" in str(refused.value)
    assert not (tmp_path / "memory" / "jigcmd-u12345" / "sub").exists()


def _owned_by(uid: int) -> Callable[[str], int | None]:
    """The owner of what exists, as if it were all `uid`'s (a temp dir stands for cgroupfs)."""
    return lambda path: uid if os.path.exists(path) else None
