"""The doctor's `host ids` line opens the lease directory as a lease does (r32 ct 2, 3b).

Refused (another mode, a read-only /run), the line fails with the fix for that, and the
`namespaces` line, whose probe leases an id too, points at it instead of the kernel. In a
container without a user namespace, a /run/jigcmd of its own is a warning naming the bind.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jigcmd.frontends.diagnosis.leasedir import refused_fix
from tests.frontends.namespaced_doctor import doctor_after
from tests.frontends.test_doctor_cli import checks
from tests.required import unavailable

pytestmark = pytest.mark.envelope

# A tmpfs over /run/jigcmd (made when the host has none: under a tmpfs over /run then).
_OVER_LEASES = (
    "[ -d /run/jigcmd ] || mount -t tmpfs -o mode=0755 jigcmd-r32E-run /run\n"
    "mkdir -p /run/jigcmd\n"
    "mount -t tmpfs -o {options} jigcmd-r32E-leases /run/jigcmd"
)


def _doctor(setup: str, tmp_path: Path) -> dict[str, dict[str, str]]:
    done = doctor_after(setup, "--json", "--state-dir", str(tmp_path / "state"), home=tmp_path)
    assert done.stdout, done.stderr
    return checks(done)


def test_a_lease_directory_others_may_write_fails_the_host_ids_line_with_chmod(
    tmp_path: Path,
) -> None:
    """/run/jigcmd mode 0777: `host ids` FAILs naming /run/jigcmd and `chmod 0755`."""
    found = _doctor(_OVER_LEASES.format(options="mode=0777"), tmp_path)
    line = found["host ids"]
    assert line["status"] == "FAIL", line
    assert line["detail"] == (
        "host id leases: /run/jigcmd must be root's and writable by root alone "
        "(owner uid 0, mode 777)"
    ), line
    assert line["hint"] == "as root: chmod 0755 /run/jigcmd", line
    namespaces = found["namespaces"]
    assert namespaces["status"] == "FAIL", namespaces
    assert "CONFIG_" not in namespaces["hint"], namespaces
    assert "`host ids` line" in namespaces["hint"], namespaces


def test_a_read_only_run_fails_the_host_ids_line_with_a_tmpfs_for_run(tmp_path: Path) -> None:
    """No /run/jigcmd/hostids can be made: the line names that path and `--tmpfs /run`."""
    found = _doctor(_OVER_LEASES.format(options="ro,mode=0755"), tmp_path)
    line = found["host ids"]
    assert line["status"] == "FAIL", line
    assert line["detail"] == (
        "host id leases: cannot make /run/jigcmd/hostids: Read-only file system"
    ), line
    assert "--tmpfs /run" in line["hint"], line
    assert "CONFIG_" not in found["namespaces"]["hint"], found["namespaces"]


def test_a_lease_directory_on_a_read_only_filesystem_fails_the_host_ids_line(
    tmp_path: Path,
) -> None:
    """/run/jigcmd/hostids there and trusted, but no lease file can be written in it (a
    read-only root whose image holds it): the line fails, naming it and `--tmpfs /run`."""
    setup = (
        _OVER_LEASES.format(options="mode=0755")
        + "\nmkdir -m 0755 /run/jigcmd/hostids\nmount -o remount,ro /run/jigcmd"
    )
    found = _doctor(setup, tmp_path)
    line = found["host ids"]
    assert line["status"] == "FAIL", line
    assert line["detail"].startswith("lease /run/jigcmd/hostids/"), line
    assert line["detail"].endswith(": Read-only file system"), line
    assert line["hint"].startswith("/run/jigcmd/hostids is on a read-only filesystem"), line
    assert "--tmpfs /run" in line["hint"], line


# A podman container's marks (/run/.containerenv), with a /run of its own.
_CONTAINER = "mount -t tmpfs -o mode=0755 jigcmd-r32E-run /run\ntouch /run/.containerenv"


def test_a_containers_own_lease_directory_warns_naming_the_hosts(tmp_path: Path) -> None:
    """No mount at /run/jigcmd in a container with no user namespace: warn, naming the bind."""
    line = _doctor(_CONTAINER, tmp_path)["host ids"]
    assert line["status"] == "warn", line
    assert "/run/jigcmd is its own" in line["detail"], line
    assert "-v /run/jigcmd:/run/jigcmd" in line["hint"], line


def test_a_containers_lease_directory_bound_from_the_host_is_ok(tmp_path: Path) -> None:
    """A mount at /run/jigcmd (the host's, bound in): ok, as outside a container."""
    setup = (
        f"{_CONTAINER}\nmkdir /run/jigcmd\n"
        "mount -t tmpfs -o mode=0755 jigcmd-r32E-shared /run/jigcmd"
    )
    line = _doctor(setup, tmp_path)["host ids"]
    assert line["status"] == "ok", line


def test_a_lease_directory_of_an_unmapped_owner_is_told_to_be_the_users_own(
    tmp_path: Path,
) -> None:
    """Owned by the overflow uid (the host's root seen from a rootless container): the fix
    is a directory of the user's own, not a chmod that the container's root cannot do."""
    if os.geteuid() != 0:
        unavailable("needs root: the directory is chowned to the overflow uid")
    leases = tmp_path / "jigcmd"
    leases.mkdir(mode=0o755)
    os.chown(leases, 65534, 65534)
    fix = refused_fix(str(leases))
    assert fix.startswith(f"{leases} is owned by no id of this user namespace"), fix
    assert "a directory of the user's own" in fix, fix
