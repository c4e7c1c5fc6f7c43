"""A v1 or hybrid delegation set up wrong, as a tester following docs/rootless.md met it:
the doctor's delegation line and every front's refusal at start name the same piece and fix."""

from __future__ import annotations

import os
import pwd
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.envelope import cgroups
from tests.rootless.rig import UNDELEGATED_USER, Rootless, remove_tree

pytestmark = [pytest.mark.envelope, pytest.mark.slow]

ROOT = "/sys/fs/cgroup"


@pytest.fixture
def hierarchies() -> tuple[str, ...]:
    """The hierarchies a job uses here (v1 and hybrid hosts delegate one directory in each)."""
    mode = cgroups.detect().mode
    if mode == "v2":
        pytest.skip("a directory per hierarchy is how v1 and hybrid hosts delegate")
    return cgroups.delegated_hierarchies(mode)


def _line(out: str, check: str) -> tuple[str, str]:
    """The doctor's line for `check` and the fix line under it."""
    lines = out.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line[6:].startswith(check)]
    return lines[at], lines[at + 1] if at + 1 < len(lines) else ""


def _run(rootless: Rootless, example: Path, **how: object) -> subprocess.CompletedProcess[str]:
    candidate = str(example / "candidates" / "passing")
    binding = str(example / "binding.toml")
    return rootless.run("run", "--binding", binding, "tests", "--files", candidate, **how)  # type: ignore[arg-type]


def test_a_subtree_chowned_without_r_is_named_by_the_doctor_and_run(
    rootless: Rootless, example: Path, hierarchies: tuple[str, ...]
) -> None:
    """Directories the user's, one cgroup.procs root's: no "ok", no "outside": chown -R."""
    procs = Path(ROOT, hierarchies[-1], f"jigcmd-u{rootless.uid}", "cgroup.procs")
    os.chown(procs, 0, 0)
    try:
        doctor = rootless.run("doctor")
        ran = _run(rootless, example)
    finally:
        os.chown(procs, rootless.uid, rootless.gid)
    said = f"{procs} (and the files beside it) belong to uid 0"
    line, fix = _line(doctor.stdout, "delegation")
    assert line.startswith("FAIL") and said in line, doctor.stdout
    assert f"chown -R {rootless.uid} {ROOT}/$c/jigcmd-u{rootless.uid}" in fix
    assert ran.returncode in (2, 3), ran.stdout + ran.stderr
    assert said in ran.stderr and "outside the delegated" not in ran.stderr, ran.stderr


def test_a_hierarchy_left_undelegated_stops_serve_at_start(
    rootless: Rootless, example: Path, hierarchies: tuple[str, ...]
) -> None:
    """pids not delegated: serve refuses to start naming it, not every call with the container."""
    missing = f"{ROOT}/pids/jigcmd-u{rootless.uid}"
    remove_tree(missing)
    try:
        served = rootless.run("serve", "--binding", str(example / "binding.toml"), input="")
    finally:
        os.makedirs(missing, exist_ok=True)
        subprocess.run(["chown", "-R", str(rootless.uid), missing], check=True)
    assert served.returncode == 2, served.stdout + served.stderr
    assert f"{missing} is missing" in served.stderr, served.stderr
    assert f"for c in pids; do mkdir -p {ROOT}/$c/jigcmd-u{rootless.uid}" in served.stderr
    assert "container" not in served.stderr


def test_another_users_subtree_is_not_offered_to_this_one(
    rootless: Rootless, hierarchies: tuple[str, ...]
) -> None:
    """A second user pointed at the first's subtree is told to use its own, not to take it."""
    other = pwd.getpwnam(UNDELEGATED_USER).pw_uid
    theirs = f"jigcmd-u{rootless.uid}"
    doctor = rootless.run("doctor", user=UNDELEGATED_USER, env={"JIGCMD_CGROUP_BASE": theirs})
    line, fix = _line(doctor.stdout, "delegation")
    assert line.startswith("FAIL"), doctor.stdout
    assert f"{theirs} is uid {rootless.uid}'s, not yours: use your own jigcmd-u{other}" in fix
    assert f"/{theirs}" not in fix.split("not yours", 1)[1], fix


def test_an_absolute_base_is_refused_saying_what_a_base_is_here(
    rootless: Rootless, example: Path, hierarchies: tuple[str, ...]
) -> None:
    """The unified directory given as the base: the doctor fails (no cgroup2 mount fix), and
    run refuses at start naming the variable, instead of running under another base."""
    absolute = {"JIGCMD_CGROUP_BASE": f"{ROOT}/unified/jigcmd-u{rootless.uid}"}
    doctor = rootless.run("doctor", env=absolute)
    line, fix = _line(doctor.stdout, "delegation")
    assert line.startswith("FAIL") and "a directory name relative to each hierarchy" in line
    assert fix.strip() == f"fix: set $JIGCMD_CGROUP_BASE to jigcmd-u{rootless.uid}", fix
    assert "mount -t cgroup2" not in doctor.stdout
    ran = _run(rootless, example, env=absolute)
    assert ran.returncode in (2, 3), ran.stdout + ran.stderr
    assert "($JIGCMD_CGROUP_BASE) is an absolute path" in ran.stderr, ran.stderr
    assert "container" not in ran.stderr


def test_a_missing_nested_base_is_refused_by_both_and_made_by_neither(
    rootless: Rootless, example: Path, hierarchies: tuple[str, ...]
) -> None:
    """`jigcmd-u<uid>/sub` with no sub: the doctor and run agree, with the mkdir; none is left."""
    nested = f"jigcmd-u{rootless.uid}/sub"
    doctor = rootless.run("doctor", env={"JIGCMD_CGROUP_BASE": nested})
    ran = _run(rootless, example, env={"JIGCMD_CGROUP_BASE": nested})
    mkdir = f"mkdir -p {ROOT}/$c/{nested}"
    line, fix = _line(doctor.stdout, "delegation")
    assert line.startswith("FAIL") and mkdir in fix, doctor.stdout
    assert ran.returncode in (2, 3) and mkdir in ran.stderr, ran.stdout + ran.stderr
    assert [c for c in hierarchies if os.path.exists(f"{ROOT}/{c}/{nested}")] == []


def test_roots_base_is_never_offered_to_a_user(
    rootless: Rootless, example: Path, hierarchies: tuple[str, ...]
) -> None:
    """`jigcmd` holds root's servers' jobs: the user is told to use its own, no chown of it."""
    other = pwd.getpwnam(UNDELEGATED_USER).pw_uid
    roots = {"JIGCMD_CGROUP_BASE": "jigcmd"}
    doctor = rootless.run("doctor", user=UNDELEGATED_USER, env=roots)
    ran = _run(rootless, example, user=UNDELEGATED_USER, env=roots)
    line, fix = _line(doctor.stdout, "delegation")
    assert line.startswith("FAIL") and "that is root's base" in line, doctor.stdout
    assert f"use your own jigcmd-u{other}" in fix and "chown" not in fix, fix
    assert ran.returncode in (2, 3), ran.stdout + ran.stderr
    assert "that is root's base" in ran.stderr and "chown" not in ran.stderr, ran.stderr


def test_a_base_root_owns_is_not_handed_to_a_user(
    rootless: Rootless, hierarchies: tuple[str, ...]
) -> None:
    """An existing base of root's (not the user's own name): use your own, never chown it."""
    other = pwd.getpwnam(UNDELEGATED_USER).pw_uid
    shared = f"jigcmdtest-shared-{secrets.token_hex(3)}"
    made = [f"{ROOT}/{c}/{shared}" for c in hierarchies]
    try:
        for directory in made:
            os.mkdir(directory)
        env = {"JIGCMD_CGROUP_BASE": shared}
        doctor = rootless.run("doctor", user=UNDELEGATED_USER, env=env)
    finally:
        for directory in made:
            remove_tree(directory)
    line, fix = _line(doctor.stdout, "delegation")
    assert line.startswith("FAIL") and f"{ROOT}/memory/{shared} belongs to uid 0" in line
    assert f"{shared} is uid 0's, not yours: use your own jigcmd-u{other}" in fix, fix
    assert f"/{shared}" not in fix.split("not yours", 1)[1], fix


def test_a_base_with_shell_characters_reaches_no_root_command(
    rootless: Rootless, example: Path
) -> None:
    """`$(…)` and `'` in the base: refused by the doctor and run, in no command printed."""
    base = "jigcmdx$(id>/tmp/jigcmd-pwned)'"
    env = {"JIGCMD_CGROUP_BASE": base}
    doctor = rootless.run("doctor", user=UNDELEGATED_USER, env=env)
    ran = _run(rootless, example, user=UNDELEGATED_USER, env=env)
    assert ran.returncode in (2, 3), ran.stdout + ran.stderr
    for said in (doctor.stdout, ran.stderr):
        assert 'contains "$\'()>"' in said, said
        # The base shows only as the refusal's quoted value, never in a command's text.
        assert "id>" not in said.replace(repr(base), ""), said
        assert "for c in" not in said, said


@pytest.fixture(autouse=True)
def _no_stray_base(rootless: Rootless) -> Iterator[None]:
    """Whatever a failing test made under the delegated subtree goes with it."""
    yield
    for controller in cgroups.V1_CONTROLLERS | {"unified"}:
        remove_tree(f"{ROOT}/{controller}/jigcmd-u{rootless.uid}/sub")
