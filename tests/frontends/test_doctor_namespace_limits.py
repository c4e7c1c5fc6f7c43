"""A `user.max_<kind>_namespaces` of 0 is named as the cause, not a kernel option or root."""

from __future__ import annotations

from jigcmd.frontends.diagnosis.verdicts import namespaces_check, network_check

_ENOSPC = "unshare user+mount+pid+ipc+uts+cgroup: ENOSPC (No space left on device)"


def test_a_zero_mount_namespace_limit_is_named_with_its_sysctl() -> None:
    """Root, user.max_mnt_namespaces = 0: the sysctl and its fix, not CONFIG_*_NS."""
    check = namespaces_check(_ENOSPC, 0, -1, {"mnt": "0\n", "user": "15000\n"})
    assert check.status == "FAIL"
    assert "user.max_mnt_namespaces = 0 allows no mnt namespace" in check.detail
    assert check.hint == "sysctl -w user.max_mnt_namespaces=15000 (persist it in /etc/sysctl.d/)"


def test_a_non_root_user_is_not_told_to_run_as_root_for_a_sysctl() -> None:
    """user.max_user_namespaces = 0 refuses root the same way: no "run jigcmd as root"."""
    check = namespaces_check(_ENOSPC, 1000, -1, {"user": "0"})
    assert check.hint is not None and "as root" not in check.hint
    assert "user.max_user_namespaces=15000" in check.hint


def test_a_zero_network_namespace_limit_is_named_not_config_net_ns() -> None:
    """Root, user.max_net_namespaces = 0: the network line names the sysctl."""
    error = "network namespace: unshare: ENOSPC (No space left on device)"
    check = network_check(error, 0, -1, {"net": "0"})
    assert check.status == "FAIL"
    assert "user.max_net_namespaces = 0" in check.detail
    assert check.hint is not None and "CONFIG_NET_NS" not in check.hint


def test_limits_above_zero_leave_the_other_hints() -> None:
    """Nothing at 0: ENOSPC is a count reached, and any other error keeps its own hint."""
    reached = namespaces_check(_ENOSPC, 0, -1, {"mnt": "15000"})
    assert reached.hint is not None and "a namespace count limit is reached" in reached.hint
    refused = namespaces_check("unshare user+mount: EINVAL (Invalid argument)", 0, -1, {"mnt": "1"})
    assert refused.hint is not None and "CONFIG_*_NS" in refused.hint
