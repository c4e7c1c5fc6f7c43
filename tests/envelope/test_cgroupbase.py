"""What a cgroup base is on each host kind, and a v1 or hybrid delegation's missing pieces."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest

from jigcmd.envelope import cgroupbase
from jigcmd.envelope.cgroupbase import (
    absent_base_directories,
    base_problem,
    configured_base,
    delegated_step,
    remove_empty,
)
from jigcmd.envelope.cgroups.v1 import V1Backend
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


@pytest.mark.parametrize("base", [f"{ROOT}/unified/jigcmd", "/jigcmd", f"{ROOT}/pids/jigcmd/x"])
def test_an_absolute_form_of_roots_base_is_fixed_with_the_users_own(base: str) -> None:
    """Without root the fix names jigcmd-u<uid>, not root's `jigcmd` (refused next)."""
    for mode in ("hybrid", "v1"):
        problem = base_problem(base, "--cgroup-base", mode, ROOT, 1003)
        assert problem is not None and "is an absolute path" in problem[0]
        assert problem[1] == "set --cgroup-base to jigcmd-u1003", (mode, problem)
        followed = problem[1].removeprefix("set --cgroup-base to ")
        assert base_problem(followed, "--cgroup-base", mode, ROOT, 1003) is None
        roots = base_problem(base, "--cgroup-base", mode, ROOT, 0)
        assert roots is not None and roots[1].startswith("set --cgroup-base to jigcmd"), roots


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


NO_BASE = ["", " ", "\t", ".", "/", "//", "a/./b", "a/..", "./a", ROOT, f"{ROOT}/"]
SHELL = ["x y", "a'b", "jigcmdx$(id>/tmp/pwned)", "a;b", "a\nb", "a`b`", "a*", "a\\b", "a\\x2"]


@pytest.mark.parametrize("base", [*NO_BASE, *SHELL])
def test_a_base_no_host_takes_is_refused_as_root_too(base: str) -> None:
    """Blank, shell metacharacters, `.`/`..` components, a hierarchy's root: refused."""
    for mode in ("hybrid", "v1", "v2"):
        problem = base_problem(base, "--cgroup-base", mode, ROOT, 0)
        assert problem is not None, (base, mode)
        assert problem[1].startswith("set --cgroup-base to "), problem
    # One v1 hierarchy's root; on v2 a directory like any other.
    assert base_problem(f"{ROOT}/memory/", "--cgroup-base", "hybrid", ROOT, 0) is not None


@pytest.mark.parametrize("base", ["cgroup.procs", "jigcmd-u1001/memory.max", "a/tasks", "io.max"])
def test_a_control_files_name_is_refused(base: str) -> None:
    """A directory cannot be made where a control file is (or will be, once its parent is)."""
    for mode in ("hybrid", "v1", "v2"):
        problem = base_problem(base, "$JIGCMD_CGROUP_BASE", mode, ROOT, 0)
        assert problem is not None and "the name of a cgroup's control file" in problem[0]
        assert problem[1] == "set $JIGCMD_CGROUP_BASE to a directory name such as jigcmd"


def test_a_file_in_a_hierarchy_is_refused_whatever_its_name(tmp_path: Path) -> None:
    """`irq.pressure` (v2) or any file not named like a controller's: refused as a file."""
    (tmp_path / "irq.pressure").write_text("")
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "odd").write_text("")
    root = str(tmp_path)
    v2 = base_problem("irq.pressure/x", "--cgroup-base", "v2", root, 0)
    assert v2 is not None and f"names {root}/irq.pressure, a file" in v2[0], v2
    v1 = base_problem("odd", "--cgroup-base", "hybrid", root, 0)
    assert v1 is not None and f"names {root}/memory/odd, a file" in v1[0], v1
    assert base_problem("memory", "--cgroup-base", "hybrid", root, 0) is None


def test_an_odd_character_is_named_with_the_ones_allowed() -> None:
    """The refusal says which characters are wrong, which are allowed and why."""
    problem = base_problem("jigcmdx$(id>/tmp/pwned)", "$JIGCMD_CGROUP_BASE", "hybrid", ROOT, 0)
    assert problem is not None
    assert "contains '$()>'" in problem[0]
    assert "letters, digits and _ . @ : + -" in problem[0]
    assert problem[1] == "set $JIGCMD_CGROUP_BASE to a directory name such as jigcmd"


@pytest.mark.parametrize("base", ["/", f"{ROOT}/memory", ROOT])
def test_roots_refusal_of_a_hierarchys_root_names_roots_base(base: str) -> None:
    """Root's base is `jigcmd`: that is the name suggested to root, not jigcmd-u0."""
    problem = base_problem(base, "--cgroup-base", "hybrid", ROOT, 0)
    assert problem is not None and "a cgroup hierarchy's root" in problem[0]
    assert problem[1] == "set --cgroup-base to a directory name such as jigcmd"


@pytest.mark.parametrize(
    "base",
    [
        "jigcmd-u1001",
        "system.slice/jigcmd@x:1.service",
        "a+b/c-d_e",
        # A templated unit's ControlGroup: systemd writes its name's dash as \x2d.
        "system.slice/system-jigcmd\\x2djarvis.slice/jigcmd-jarvis@alice.service",
    ],
)
def test_ordinary_names_are_bases(base: str) -> None:
    """What cgroup names look like in practice is taken."""
    assert base_problem(base, "--cgroup-base", "hybrid", ROOT, 1001) is None


@pytest.mark.parametrize(
    ("mode", "base"),
    [(m, b) for m in ("hybrid", "v1", "v2") for b in ("jigcmd", "jigcmd/sub")]
    + [("v2", f"{ROOT}/jigcmd/")],
)
def test_roots_base_is_refused_to_another_user(mode: str, base: str) -> None:
    """`jigcmd` holds root's servers' jobs: never offered, nor chowned, to uid 1001."""
    problem = base_problem(base, "--cgroup-base", mode, ROOT, 1001)
    assert problem is not None and "that is root's base" in problem[0], (mode, base)
    assert "chown" not in problem[1]
    if mode != "v2":
        assert problem[1] == "use your own jigcmd-u1001: --cgroup-base jigcmd-u1001"
        by_variable = base_problem(base, "$JIGCMD_CGROUP_BASE", mode, ROOT, 1001)
        assert by_variable is not None
        assert by_variable[1] == (
            "use your own jigcmd-u1001: unset $JIGCMD_CGROUP_BASE, or set it to jigcmd-u1001"
        )
    assert base_problem(base, "--cgroup-base", mode, ROOT, 0) is None


def test_a_root_owned_base_is_not_handed_to_a_user() -> None:
    """A base root owns (not the user's own name) stays root's: the fix makes jigcmd-u1001."""
    owners = {c: (0, 0) for c in HYBRID}
    step = delegated_step(1001, "shared", ROOT, "hybrid", owners)
    assert step is not None
    assert step.before.startswith("shared is uid 0's, not yours: use your own jigcmd-u1001")
    assert "shared" not in step.command
    # The user's own name, made by root and not chowned yet, is theirs to receive.
    own = delegated_step(1001, "jigcmd-u1001", ROOT, "hybrid", owners)
    assert own is not None and own.before == ""
    assert f"chown -R 1001 {ROOT}/$c/jigcmd-u1001" in own.command


def test_the_root_command_quotes_the_base() -> None:
    """Belt and braces: even a base base_problem would refuse stays one word in the loop."""
    base = "a b'$(id>/tmp/pwned)"
    step = delegated_step(1001, base, ROOT, "hybrid", {})
    assert step is not None
    words = shlex.split(step.command)
    # mkdir's word, and chown's before `; done`.
    assert f"{ROOT}/$c/{base}" in words and f"{ROOT}/$c/{base};" in words, words
    assert "$(id" not in step.command.replace(shlex.quote(base), "")


def test_an_empty_option_is_a_base_an_empty_variable_is_none() -> None:
    """`--cgroup-base ''` is refused (never the default); an empty variable is unset."""
    assert configured_base("", {}) == ("", "--cgroup-base")
    assert configured_base(None, {"JIGCMD_CGROUP_BASE": ""}) is None


def test_the_base_directories_made_are_the_ones_removed(tmp_path: Path) -> None:
    """What was absent before is listed shallowest first and removed deepest first."""
    (tmp_path / "memory" / "a").mkdir(parents=True)
    (tmp_path / "pids").mkdir()
    backend = V1Backend(
        {"memory": str(tmp_path / "memory"), "pids": str(tmp_path / "pids")}, "a/b", None
    )
    absent = absent_base_directories(backend)
    assert absent == [f"{tmp_path}/memory/a/b", f"{tmp_path}/pids/a", f"{tmp_path}/pids/a/b"]
    for directory in absent:
        os.mkdir(directory)
    remove_empty(absent)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "memory", "pids"]
