"""The delegation verdict: each missing step of a rootless setup once, with a fix for this host."""

from __future__ import annotations

import pytest

from jigcmd.frontends.diagnosis.delegation import DelegationFacts, delegation_check
from jigcmd.frontends.diagnosis.hostfacts import own_cgroup2_path

UID = 1001
BASE = f"jigcmd-u{UID}"
UNIFIED = f"/sys/fs/cgroup/unified/{BASE}"
# What a hybrid job has a directory in: its CPU time and its kill come from the unified
# hierarchy, so no cpuacct and no freezer.
ALL = {c: UID for c in ("memory", "pids", "cpu", "unified")}
V1 = {c: UID for c in ("memory", "pids", "cpu", "cpuacct", "freezer")}


def hybrid(**changes: object) -> DelegationFacts:
    facts: dict[str, object] = {
        "uid": UID,
        "mode": "hybrid",
        "base": BASE,
        "owners": ALL,
        "own_cgroup": UNIFIED,
        "may_move": True,
        "parent_pid": 4242,
    }
    return DelegationFacts(**(facts | changes))  # type: ignore[arg-type]


def test_a_hybrid_host_set_up_completely_is_ok() -> None:
    """Every hierarchy owned and this process inside the unified one."""
    check = delegation_check(hybrid())
    assert check.status == "ok"
    assert f"this process's cgroup2 is inside {UNIFIED}" in check.detail


def test_the_unified_step_missing_is_named_with_the_exact_command() -> None:
    """Delegated directories made, the shell not moved: the one step and the shell's pid."""
    check = delegation_check(hybrid(own_cgroup="/sys/fs/cgroup/unified", may_move=False))
    assert check.status == "FAIL"
    assert check.detail.startswith(
        f"this process's cgroup2 is /sys/fs/cgroup/unified, outside the delegated {UNIFIED}"
    )
    assert "join cgroup: Permission denied" in check.detail
    assert check.hint is not None
    assert f"sudo sh -c 'echo 4242 > {UNIFIED}/cgroup.procs'" in check.hint
    assert "mkdir" not in check.hint  # only the missing step


def test_nothing_delegated_is_one_line_with_both_steps_in_order() -> None:
    """Directories missing and the shell outside: two numbered steps, each said once."""
    owners = {c: None for c in ALL}
    check = delegation_check(
        hybrid(owners=owners, own_cgroup="/sys/fs/cgroup/unified", may_move=False)
    )
    assert check.status == "FAIL"
    assert check.detail.startswith(
        "2 steps are missing: (1) uid 1001's delegated cgroup subtree jigcmd-u1001 is incomplete"
    )
    assert check.detail.count("/sys/fs/cgroup/memory/jigcmd-u1001 is missing") == 1
    assert check.hint is not None
    first, second = check.hint.split("; then ")
    assert first.startswith("(1) sudo sh -c 'for c in memory pids cpu unified;")
    assert second.startswith("(2) move the shell that starts jigcmd into it")


def test_only_the_hierarchies_that_are_wrong_are_in_the_command() -> None:
    """One hierarchy missing, one owned by someone else: the loop names exactly those two."""
    owners = {**ALL, "pids": None, "cpu": 0}
    check = delegation_check(hybrid(owners=owners))
    assert check.hint is not None
    assert "for c in pids cpu; do mkdir -p" in check.hint
    assert "/sys/fs/cgroup/cpu/jigcmd-u1001 belongs to uid 0" in check.detail


def test_a_hybrid_host_needs_no_cpuacct_or_freezer_directory() -> None:
    """A hybrid job makes none there: their absence is no failure, nor in the fix."""
    missing = delegation_check(hybrid(owners={**ALL, "cpuacct": None, "freezer": None}))
    assert missing.status == "ok"
    check = delegation_check(hybrid(owners={**ALL, "memory": None}))
    assert check.hint is not None
    assert "for c in memory; do" in check.hint
    assert "cpuacct" not in check.hint + check.detail


def test_a_v1_host_needs_cpuacct_and_freezer() -> None:
    """Pure v1: the job's CPU time and its kill are there."""
    check = delegation_check(
        hybrid(mode="v1", owners={**V1, "freezer": None}, own_cgroup=None, may_move=False)
    )
    assert check.status == "FAIL"
    assert check.hint is not None
    assert "for c in freezer; do mkdir -p" in check.hint


def test_a_v1_host_has_no_unified_step() -> None:
    """Pure v1: the five hierarchies, nothing about cgroup2."""
    check = delegation_check(hybrid(mode="v1", owners=V1, own_cgroup=None, may_move=False))
    assert check.status == "ok"


def test_inside_a_container_the_fix_is_for_its_root_not_sudo() -> None:
    """No sudo in a container: the command is for the container's root."""
    check = delegation_check(
        hybrid(own_cgroup="/sys/fs/cgroup/unified", may_move=False, container="docker")
    )
    assert check.hint is not None
    assert "as root in this docker container: sh -c 'echo 4242 >" in check.hint
    assert "sudo" not in check.hint


def v2(**changes: object) -> DelegationFacts:
    own = "/sys/fs/cgroup/user.slice/user-1001.slice/user@1001.service/app.slice/x.scope"
    facts: dict[str, object] = {
        "uid": UID,
        "mode": "v2",
        "base": own,
        "own_cgroup": own,
        "own_owner": UID,
        "may_move": True,
        "own_controllers": frozenset({"memory", "pids", "cpu", "io"}),
        "systemd": True,
        "parent_pid": 7,
    }
    return DelegationFacts(**(facts | changes))  # type: ignore[arg-type]


def test_a_delegated_v2_scope_is_ok() -> None:
    """systemd-run --user --scope -p Delegate=yes: owned, with memory, pids and cpu."""
    assert delegation_check(v2()).status == "ok"


@pytest.mark.parametrize(
    ("systemd", "container", "says"),
    [
        (True, None, "systemd-run --user --scope -p Delegate=yes"),
        (
            False,
            None,
            "sudo sh -c 'echo +memory +pids +cpu > /sys/fs/cgroup/cgroup.subtree_control",
        ),
        (True, "podman", "as root in this podman container"),
    ],
)
def test_an_undelegated_v2_cgroup_gets_the_fix_this_host_can_use(
    systemd: bool, container: str | None, says: str
) -> None:
    """systemd's scope where systemd runs; the cgroupfs steps elsewhere."""
    check = delegation_check(v2(own_owner=0, may_move=False, systemd=systemd, container=container))
    assert check.status == "FAIL"
    assert "is not delegated to uid 1001" in check.detail
    assert check.hint is not None and says in check.hint


def test_the_cgroupfs_fix_ends_by_exec_ing_jigcmd_in_the_moved_shell() -> None:
    """Followed literally, the steps leave jigcmd alone in the cgroup: `exec jigcmd …` from
    the moved shell, never a jigcmd typed beside it (refused for sharing the cgroup)."""
    check = delegation_check(v2(own_owner=0, may_move=False, systemd=False))
    assert check.hint is not None
    assert "echo 7 > /sys/fs/cgroup/jigcmd-u1001/cgroup.procs" in check.hint
    assert "then, from that shell, `exec jigcmd …`" in check.hint


def test_a_v2_cgroup_chowned_without_r_fails_naming_cgroup_procs() -> None:
    """The directory is the user's, cgroup.procs root's: jigcmd cannot move itself into its
    leaf, so the line fails (it said ok, then every front crashed) with `chown -R`."""
    check = delegation_check(v2(unwritable=("cgroup.procs", "cgroup.subtree_control")))
    assert check.status == "FAIL"
    assert "cgroup.procs and cgroup.subtree_control are not" in check.detail
    assert "chowned without -R" in check.detail
    assert check.hint is not None and check.hint.startswith("as root: chown -R 1001 /sys/")


def test_a_read_only_cgroup2_mount_is_named_not_an_owner() -> None:
    """EROFS is not "owned by uid 1001 is not delegated to uid 1001": the mount is named."""
    own = v2().own_cgroup
    check = delegation_check(v2(may_move=False, read_only=True, base_cgroup=own))
    assert check.status == "FAIL"
    assert f"the cgroup mount holding {own} is read-only" in check.detail
    assert "not delegated" not in check.detail
    assert check.hint is not None and "mount -o remount,rw /sys/fs/cgroup" in check.hint


def test_a_v2_delegation_without_cpu_names_the_missing_controller() -> None:
    """A user manager that delegates memory and pids only: the delegate.conf step."""
    check = delegation_check(v2(own_controllers=frozenset({"memory", "pids"})))
    assert check.status == "FAIL"
    assert "offers no cpu controller" in check.detail
    assert check.hint is not None and "Delegate=memory pids cpu" in check.hint


def test_a_process_sharing_the_delegated_v2_cgroup_fails_the_line_naming_it() -> None:
    """The scope's shell stayed beside the doctor: named with its pid, and exec as the fix."""
    check = delegation_check(v2(sharing=((4242, "bash"),)))
    assert check.status == "FAIL"
    assert "pid 4242 (bash) shares your delegated cgroup /sys/fs/cgroup/user.slice" in check.detail
    assert "no-internal-process" in check.detail
    assert check.hint is not None
    assert "systemd-run --user --scope -p Delegate=yes jigcmd" in check.hint
    assert "exec jigcmd" in check.hint


def test_the_own_cgroup2_path_is_the_zero_line() -> None:
    """/proc/self/cgroup on a hybrid host: v1 lines, then `0::` with the cgroup2 path."""
    text = "12:memory:/x\n1:name=systemd:/\n0::/user.slice/a.scope\n"
    assert own_cgroup2_path(text) == "/user.slice/a.scope"
    assert own_cgroup2_path("12:memory:/x\n") is None


def test_an_absolute_base_on_a_hybrid_host_fails_saying_what_a_base_is() -> None:
    """Not "ok in every hierarchy" from one directory read four times, nor a cgroup2 mount."""
    check = delegation_check(
        hybrid(base=UNIFIED, source="$JIGCMD_CGROUP_BASE", owners={c: UID for c in ALL})
    )
    assert check.status == "FAIL"
    assert "is an absolute path" in check.detail
    assert "a directory name relative to each hierarchy" in check.detail
    assert check.hint == f"set $JIGCMD_CGROUP_BASE to {BASE}"


def test_directories_chowned_without_r_fail_naming_cgroup_procs() -> None:
    """The process is inside, the directories are the user's, cgroup.procs root's: not ok."""
    check = delegation_check(hybrid(procs_owners={"unified": 0}, may_move=False))
    assert check.status == "FAIL"
    assert f"{UNIFIED}/cgroup.procs (and the files beside it) belong to uid 0" in check.detail
    assert "outside" not in check.detail
    assert check.hint is not None
    assert f"chown -R {UID} /sys/fs/cgroup/$c/{BASE}" in check.hint


def test_another_users_subtree_is_theirs_not_chowned_to_this_user() -> None:
    """uid 1003 pointed at jigcmd-u1001: use your own jigcmd-u1003."""
    check = delegation_check(hybrid(uid=1003, source="$JIGCMD_CGROUP_BASE"))
    assert check.status == "FAIL"
    assert check.hint is not None
    assert "is uid 1001's, not yours: use your own jigcmd-u1003" in check.hint
    assert f"chown -R 1003 /sys/fs/cgroup/$c/{BASE}" not in check.hint


def test_a_doctor_under_su_is_not_told_to_move_su() -> None:
    """su ends with the doctor: moving it helps nothing, so the command says which to move."""
    check = delegation_check(
        hybrid(own_cgroup="/sys/fs/cgroup/unified", may_move=False, parent_name="su")
    )
    assert check.hint is not None
    assert "echo 4242 >" not in check.hint
    assert f"echo PID > {UNIFIED}/cgroup.procs'" in check.hint
    assert "pid 4242 su, ends with it" in check.hint


_JOBS = "/sys/fs/cgroup/user.slice/user-1001.slice/user@1001.service/app.slice/jobs.slice"
_SESSION = "/sys/fs/cgroup/user.slice/user-1001.slice/session-1.scope"


def test_an_owned_v2_base_the_process_cannot_reach_fails_naming_both_cgroups() -> None:
    """A base the user owns, the doctor in a login's root-owned scope: the real cgroup, the
    base and its variable, the ancestor the kernel asks for, and a scope as the fix."""
    check = delegation_check(
        v2(
            base=_JOBS,
            source="$JIGCMD_CGROUP_BASE",
            own_cgroup=_SESSION,
            base_cgroup=_JOBS,
            may_move=False,
        )
    )
    assert check.status == "FAIL"
    assert (
        f"this process's cgroup {_SESSION} is outside the cgroup base {_JOBS} "
        "($JIGCMD_CGROUP_BASE)" in check.detail
    )
    assert "/sys/fs/cgroup/user.slice/user-1001.slice/cgroup.procs" in check.detail
    assert check.hint is not None and "systemd-run --user --scope -p Delegate=yes" in check.hint


def test_a_reachable_owned_v2_base_is_ok_and_named_as_the_base() -> None:
    """Inside the delegated subtree: ok, the line naming the base, not "this process's"."""
    own = "/sys/fs/cgroup/user.slice/user-1001.slice/user@1001.service/app.slice/x.scope"
    facts = v2(base=_JOBS, source="--cgroup-base", own_cgroup=own, base_cgroup=_JOBS)
    check = delegation_check(facts)
    assert check.status == "ok"
    assert check.detail.startswith(f"the cgroup base {_JOBS} (--cgroup-base) is delegated")


def test_a_root_owned_v2_base_is_blamed_with_its_option() -> None:
    """`--cgroup-base` naming root's directory: that base and the option, never the process's
    own cgroup, which may well be delegated."""
    base = "/sys/fs/cgroup/user.slice"
    check = delegation_check(
        v2(base=base, source="--cgroup-base", base_cgroup=base, own_owner=0, may_move=False)
    )
    assert check.status == "FAIL"
    assert f"the cgroup base {base} (--cgroup-base; owned by uid 0)" in check.detail
    assert "this process's cgroup" not in check.detail
    assert check.hint is not None and check.hint.startswith("set --cgroup-base to")
