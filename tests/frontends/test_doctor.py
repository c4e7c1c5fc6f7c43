"""`jigcmd doctor`: verdict wording, check isolation, output forms, and the real run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from jigcmd.frontends import doctor as doctor_module
from jigcmd.frontends.diagnosis.verdicts import (
    Check,
    cgroup_check,
    end_to_end_check,
    kernel_check,
    namespaces_check,
    network_check,
    oom_score_check,
    platform_check,
    privilege_check,
    runtime_check,
    seccomp_check,
    userns_check,
)
from jigcmd.journal.store import DB_NAME, Journal
from tests.faults.disk import required_disk
from tests.required import require_root

_SYS_ADMIN = 1 << 21
_SYS_RESOURCE = 1 << 24
_NET_ADMIN = 1 << 12
_SETUID = 1 << 7
_SETGID = 1 << 6
_NO_SYSCTLS: dict[str, str | None] = {}


def test_root_with_cap_sys_resource_pins_the_oom_score() -> None:
    """Root holding CAP_SYS_RESOURCE: the candidates' score is a floor."""
    assert oom_score_check(0, _SYS_ADMIN | _SYS_RESOURCE).status == "ok"


def test_without_cap_sys_resource_the_oom_score_is_a_warning_naming_the_capability() -> None:
    """Root lacking it, or rootless: a warning (not a failure) that says what could happen."""
    root = oom_score_check(0, _SYS_ADMIN)
    assert (root.status, root.ok) == ("warn", True)
    assert "could lower it to 0" in root.detail
    assert "get the envelope's pid 1 OOM-killed in their place" in root.detail
    assert "UNCERTAIN" in root.detail
    assert root.hint is not None and "--cap-add SYS_RESOURCE" in root.hint
    rootless = oom_score_check(1000, 0)
    assert rootless.status == "warn"
    assert "rootless" in rootless.detail


def test_cap_sys_resource_outside_the_bounding_set_is_not_offered_as_a_plain_cap_add() -> None:
    """A bounding set without it: --cap-add may be dropped silently, and the hint says so."""
    bounded = oom_score_check(0, _SYS_ADMIN, _SYS_ADMIN)
    assert bounded.status == "warn"
    assert "bounding set" in bounded.detail
    assert bounded.hint is not None and "host's own bounding set lacks it" in bounded.hint
    offered = oom_score_check(0, _SYS_ADMIN, _SYS_ADMIN | _SYS_RESOURCE)
    assert offered.hint == "grant CAP_SYS_RESOURCE (in a container: --cap-add SYS_RESOURCE)"
    host = oom_score_check(0, _SYS_ADMIN, _SYS_ADMIN, in_container=False)
    assert host.hint is not None and "--cap-add" not in host.hint


def test_a_kernel_older_than_5_11_fails_naming_what_was_found_and_why() -> None:
    """The detail quotes the release and the close_range requirement."""
    check = kernel_check("5.10.0-28-amd64")
    assert check.status == "FAIL"
    assert "5.10.0-28-amd64" in check.detail
    assert "CLOSE_RANGE_CLOEXEC" in check.detail
    assert check.hint == "upgrade the kernel to 5.11 or newer"


def test_kernel_5_11_and_later_pass() -> None:
    """Versions compare numerically, not as text (6.2 is newer than 5.11)."""
    assert kernel_check("5.11.0").ok
    assert kernel_check("6.2.0-generic").ok


def test_an_unreadable_kernel_release_fails() -> None:
    """A release with no version number is not taken on trust."""
    assert kernel_check("unknown").status == "FAIL"


def test_non_linux_and_unsupported_architectures_fail() -> None:
    """Only Linux on x86_64 and aarch64 has syscall tables and a seccomp filter."""
    assert platform_check("Darwin", "arm64").status == "FAIL"
    riscv = platform_check("Linux", "riscv64")
    assert riscv.status == "FAIL"
    assert "riscv64" in riscv.detail
    assert platform_check("Linux", "aarch64").ok


def test_a_non_root_user_is_rootless_and_leaves_the_cgroups_to_the_delegation_check() -> None:
    """Without root the privileges line says what rootless needs; delegation judges it."""
    check = privilege_check(1000, 0)
    assert check.status == "ok"
    assert "uid 1000, rootless" in check.detail and "delegated cgroup subtree" in check.detail


def test_root_without_cap_sys_admin_fails_as_a_restricted_container() -> None:
    """Root in a container with dropped capabilities cannot build namespaces."""
    check = privilege_check(0, 0)
    assert check.status == "FAIL"
    assert "CAP_SYS_ADMIN" in check.detail
    assert privilege_check(0, _SYS_ADMIN).ok


def test_max_user_namespaces_zero_is_named_with_the_sysctl_to_change() -> None:
    """A refused probe is explained by the sysctl that caused it."""
    check = userns_check("EPERM", {"user.max_user_namespaces": "0\n"}, root=True)
    assert check.status == "FAIL"
    assert "user.max_user_namespaces = 0" in check.detail
    assert check.hint is not None
    assert "sysctl -w user.max_user_namespaces=" in check.hint


def test_ubuntu_apparmor_restriction_is_named_for_non_root_users() -> None:
    """kernel.apparmor_restrict_unprivileged_userns = 1 explains an unprivileged refusal."""
    sysctls = {"kernel.apparmor_restrict_unprivileged_userns": "1"}
    check = userns_check("EACCES", sysctls, root=False)
    assert check.status == "FAIL"
    assert "apparmor_restrict_unprivileged_userns = 1" in check.detail
    assert check.hint is not None
    assert "AppArmor" in check.hint


def test_debian_unprivileged_userns_clone_zero_is_named_for_non_root_users() -> None:
    """kernel.unprivileged_userns_clone = 0 explains an unprivileged refusal."""
    check = userns_check("EPERM", {"kernel.unprivileged_userns_clone": "0"}, root=False)
    assert "unprivileged_userns_clone = 0" in check.detail


def test_unprivileged_only_restrictions_do_not_explain_a_root_refusal() -> None:
    """Root is not bound by the two unprivileged-only sysctls, so the hint points elsewhere."""
    sysctls = {
        "kernel.apparmor_restrict_unprivileged_userns": "1",
        "kernel.unprivileged_userns_clone": "0",
    }
    check = userns_check("EPERM", sysctls, root=True)
    assert check.status == "FAIL"
    assert "apparmor" not in check.detail
    assert check.hint is not None
    assert "seccomp" in check.hint


def test_the_real_attempt_decides_user_namespaces() -> None:
    """A successful probe passes whatever the unprivileged sysctls say."""
    sysctls = {"kernel.apparmor_restrict_unprivileged_userns": "1"}
    assert userns_check(None, sysctls, root=True).ok


def test_namespace_failures_get_the_hint_of_their_step() -> None:
    """The step before the first colon selects the fix."""
    maps = namespaces_check("user namespace id maps: EPERM (Operation not permitted)")
    assert maps.hint is not None
    assert "uid/gid maps" in maps.hint
    proc = namespaces_check("mount a fresh /proc: EPERM (Operation not permitted)")
    assert proc.hint is not None
    assert "masked paths" in proc.hint
    # "mount" inside the unshare step's own name must not select the mount hint.
    unshare = namespaces_check("unshare user+mount+pid+ipc+uts+cgroup: EPERM; refused alone: pid")
    assert unshare.hint is not None
    assert "CONFIG_*_NS" in unshare.hint


def test_a_namespace_count_reached_is_named_as_a_count_not_the_kernels_config() -> None:
    """ENOSPC under a limit above 0 is the count of this user's namespaces reached: the fix
    names the limits as they are, not CONFIG_*_NS, nor a disk."""
    limits = {"user": "15000", "mnt": "15000", "pid": "8", "net": "4"}
    error = "unshare user+mount+pid+ipc+uts+cgroup: ENOSPC (No space left on device)"
    hint = namespaces_check(error, 0, -1, limits).hint or ""
    assert hint.startswith("a namespace count limit is reached, not a full disk"), hint
    assert "(now: user 15000, mnt 15000, pid 8)" in hint and "CONFIG" not in hint
    net = network_check("network namespace: ENOSPC (No space left on device)", 0, -1, limits)
    assert "(now: net 4)" in (net.hint or "") and "CONFIG" not in (net.hint or "")


def test_root_is_never_told_to_run_as_root_and_without_cap_sys_admin_is_told_to_get_it() -> None:
    """A container's root lacking CAP_SYS_ADMIN: the hint names it; with it, no sudo advice."""
    error = "uts namespace (sethostname): EPERM (Operation not permitted)"
    lacking = namespaces_check(error, 0, _SETUID | _SETGID).hint
    assert lacking == "grant CAP_SYS_ADMIN (in a container: --cap-add SYS_ADMIN)"
    for step in (error, "user namespace id maps: EPERM", "mount namespace (x): EPERM"):
        hint = namespaces_check(step, 0, _SYS_ADMIN | _SETUID | _SETGID).hint
        assert hint is not None and "run jigcmd as root" not in hint, hint
    assert "run jigcmd as root" in (namespaces_check(error, 1000, 0).hint or "")


def test_root_without_cap_setgid_or_setuid_is_told_to_get_them() -> None:
    """`--cap-drop ALL` takes the engine's default CAP_SETUID and CAP_SETGID: the groups'
    drop and the id maps are refused, and the hint names both, not a container line."""
    error = "drop supplementary groups: EPERM (Operation not permitted)"
    hint = namespaces_check(error, 0, _SYS_ADMIN | _NET_ADMIN).hint
    assert hint == (
        "grant CAP_SETUID and CAP_SETGID (in a container: --cap-add SETUID --cap-add SETGID)"
    )
    everything = namespaces_check(error, 0, 0).hint
    assert everything is not None
    assert everything.startswith("grant CAP_SYS_ADMIN, CAP_SETUID and CAP_SETGID ")


def test_cgroup_problems_fail_with_the_first_problem_and_a_count() -> None:
    """The line stays readable; the hint carries every problem."""
    problems = ["cannot create cgroups in /a (memory)", "cannot create cgroups in /b (pids)"]
    check = cgroup_check("v1", ["/sys/fs/cgroup/<controller>/jigcmd"], problems)
    assert check.status == "FAIL"
    assert check.detail.startswith("v1, jobs under /sys/fs/cgroup/<controller>/jigcmd: ")
    assert "(and 1 more)" in check.detail
    assert check.hint == "; ".join(problems)


def test_cgroups_print_the_mode_and_base_when_usable() -> None:
    """Mode and where jobs go are on the ok line."""
    check = cgroup_check("v2", ["/sys/fs/cgroup/jigcmd"], [])
    assert check.ok
    assert check.detail == "v2, jobs under /sys/fs/cgroup/jigcmd"


def test_no_cgroup_hierarchy_fails_with_a_mount_hint() -> None:
    """Detection failure is a FAIL with how to mount cgroup2."""
    check = cgroup_check(None, (), ["no cgroup hierarchy is mounted at /sys/fs/cgroup"])
    assert check.status == "FAIL"
    assert check.hint is not None
    assert "mount -t cgroup2" in check.hint


def test_seccomp_fails_without_the_status_field_and_notes_a_stacked_filter() -> None:
    """No Seccomp field means no seccomp; an existing filter is only a note."""
    assert seccomp_check(None, None, None).status == "FAIL"
    assert seccomp_check("0", None, "EINVAL").status == "FAIL"
    stacked = seccomp_check("2", None, None)
    assert stacked.ok
    assert "stacked" in stacked.detail


def test_a_failed_network_namespace_blames_the_capability_root_lacks() -> None:
    """Without CAP_SYS_ADMIN the unshare fails: the hint names it, not CAP_NET_ADMIN."""
    net_admin = 1 << 12
    no_sys_admin = network_check("network namespace: EPERM", 0, net_admin).hint
    assert no_sys_admin is not None and "--cap-add SYS_ADMIN" in no_sys_admin
    assert "NET_ADMIN" not in no_sys_admin
    no_net_admin = network_check("network namespace: EPERM", 0, _SYS_ADMIN).hint
    assert no_net_admin is not None and "--cap-add NET_ADMIN" in no_net_admin
    assert "SYS_ADMIN" not in no_net_admin
    both = network_check("network namespace: EPERM", 0, _SYS_ADMIN | net_admin).hint
    assert both is not None and "run jigcmd as root" not in both


def test_network_runtime_and_end_to_end_failures_carry_hints() -> None:
    """Each failing verdict says what to do."""
    assert network_check("network namespace: EPERM").hint is not None
    runtime = runtime_check(None, None, None, "no executable Bun binary at /x")
    assert runtime.status == "FAIL"
    assert runtime.hint is not None
    assert "JIGCMD_BUN" in runtime.hint
    wrong = end_to_end_check(1, None, "", None)
    assert wrong.status == "FAIL"
    assert "exit code 1" in wrong.detail
    assert end_to_end_check(0, None, "ok\n", None, 12.0).ok


def _fake_checks(monkeypatch: pytest.MonkeyPatch, *checks: Check | Exception) -> None:
    def make(item: Check | Exception) -> object:
        def run() -> Check:
            if isinstance(item, Exception):
                raise item
            return item

        return run

    fakes = tuple((f"fake {index}", make(item)) for index, item in enumerate(checks))
    monkeypatch.setattr(doctor_module, "_CHECKS", fakes)


def test_a_crashing_check_becomes_a_fail_line_and_the_others_still_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One failure never hides the next check."""
    _fake_checks(monkeypatch, RuntimeError("boom"), Check("later", "ok", "fine"))
    results = doctor_module.run_checks()
    assert [r.status for r in results] == ["FAIL", "ok"]
    assert results[0].check == "fake 0"
    assert "boom" in results[0].detail


def test_doctor_exits_1_and_prints_the_fix_when_a_check_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Warnings pass; a FAIL makes the exit status non-zero and shows its fix."""
    _fake_checks(
        monkeypatch,
        Check("a", "ok", "fine", "never shown"),
        Check("b", "warn", "odd", "look"),
        Check("c", "FAIL", "broken", "repair it"),
    )
    assert doctor_module.doctor() == 1
    out = capsys.readouterr().out
    assert "FAIL  c  broken\n" in out
    assert "fix: repair it" in out
    assert "fix: look" in out
    assert "never shown" not in out
    assert "1 of 3 checks failed" in out


def test_a_pass_with_warnings_counts_them_instead_of_saying_all_passed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A warning passes (status 0), and the last line says how many passed only with one."""
    _fake_checks(
        monkeypatch,
        Check("a", "ok", "fine"),
        Check("b", "warn", "odd", "look"),
        Check("c", "warn", "odder", "look again"),
    )
    assert doctor_module.doctor() == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == "3 checks passed, 2 with a warning: jigcmd can build the envelope here."


def test_only_ok_checks_say_all_passed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every check ok: "all N checks passed"."""
    _fake_checks(monkeypatch, Check("a", "ok", "fine"), Check("b", "ok", "also fine"))
    assert doctor_module.doctor() == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == "all 2 checks passed: jigcmd can build the envelope here."


def test_json_output_is_a_list_of_check_objects(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json prints exactly a list of {check, ok, status, detail, hint}."""
    _fake_checks(monkeypatch, Check("a", "ok", "fine"), Check("b", "warn", "odd", "look"))
    assert doctor_module.doctor(as_json=True) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"check": "a", "ok": True, "status": "ok", "detail": "fine", "hint": None},
        {"check": "b", "ok": True, "status": "warn", "detail": "odd", "hint": "look"},
    ]


@pytest.mark.envelope
def test_doctor_passes_on_a_machine_that_can_build_the_envelope(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every check is ok here, the end-to-end run included (root needed)."""
    require_root()
    status = doctor_module.doctor()
    out = capsys.readouterr().out
    assert status == 0, out
    assert "ok    end-to-end" in out
    assert "FAIL" not in out


@pytest.mark.envelope
def test_the_end_to_end_deadline_starts_once_the_runtime_is_staged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probe's plan (and its deadline) is made after the zygote started and staged the
    runtime: a slow start is not reported as a candidate that missed its deadline."""
    require_root()
    from jigcmd.envelope.native import NativeExecutor  # noqa: PLC0415 - Linux only
    from jigcmd.policy import planner  # noqa: PLC0415 - patched where the doctor imports it

    started: list[bool] = []
    start, plan = NativeExecutor.start, planner.candidate_plan

    async def recorded_start(self: NativeExecutor) -> None:
        await start(self)
        started.append(True)

    def planned(**kwargs: Any) -> Any:
        assert started, "the probe's deadline was set before the zygote staged the runtime"
        return plan(**kwargs)

    monkeypatch.setattr(NativeExecutor, "start", recorded_start)
    monkeypatch.setattr(planner, "candidate_plan", planned)
    check = doctor_module._end_to_end()
    assert check.status == "ok", check


def _state_check(state: Path) -> Check:
    token = doctor_module._STATE_DIR.set(state)
    try:
        return doctor_module._state()
    finally:
        doctor_module._STATE_DIR.reset(token)


def test_a_state_directory_others_may_write_fails_with_the_reason_and_its_fix(
    tmp_path: Path,
) -> None:
    """Mode 1777: the reason and `chmod 700` as the fix, not a Python repr to report."""
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o1777)
    check = _state_check(state)
    assert (check.status, check.hint) == ("FAIL", f"run chmod 700 {state}")
    assert check.detail == f"state directory {state} is writable by group or others (mode 1777)"


def test_a_state_directory_on_a_read_only_mount_fails_with_remount_as_the_fix(
    tmp_path: Path,
) -> None:
    """Read-only: the journal and why, and remounting as the fix; nothing to report."""
    with required_disk() as disk:
        with Journal.open(disk.path):
            pass
        disk.read_only()
        check = _state_check(disk.path)
    assert check.status == "FAIL"
    assert check.detail == (
        f"journal {disk.path / DB_NAME}: the filesystem holding {disk.path} is mounted read-only"
    )
    assert check.hint is not None and check.hint.startswith("remount it read-write")


def test_a_state_directory_on_a_full_disk_fails_with_free_space_as_the_fix(
    tmp_path: Path,
) -> None:
    """Full: named full, the fix frees space and keeps the journal."""
    with required_disk() as disk:
        with Journal.open(disk.path):
            pass
        disk.fill()
        check = _state_check(disk.path)
    assert check.status == "FAIL"
    assert f"the filesystem holding {disk.path} is full" in check.detail
    assert check.hint is not None and check.hint.startswith("free space on it")
