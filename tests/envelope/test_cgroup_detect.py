"""Choosing the cgroup backend from the mount table, and job names."""

from __future__ import annotations

from pathlib import Path

import pytest

from jigcmd.envelope.cgroups import CgroupUnavailable, check_job_name, detect, read_mounts
from jigcmd.envelope.cgroups.v1 import V1Backend
from jigcmd.envelope.cgroups.v2 import V2Backend
from jigcmd.plan import Limits

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""

PURE_V2 = """\
22 1 0:21 / / rw - ext4 /dev/sda1 rw
30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
"""

COMOUNTED_V1 = """\
31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
"""


def mountinfo(tmp_path: Path, text: str) -> str:
    path = tmp_path / "mountinfo"
    path.write_text(text)
    return str(path)


def test_a_hybrid_host_gets_the_v1_backend_with_the_unified_hierarchy(tmp_path: Path) -> None:
    """v1 controllers plus a cgroup2 mount below the root is the hybrid mode."""
    backend = detect(mountinfo=mountinfo(tmp_path, HYBRID))
    assert isinstance(backend, V1Backend)
    assert backend.mode == "hybrid"
    assert backend.unified == "/sys/fs/cgroup/unified"
    assert backend.hierarchies["cpu"] == "/sys/fs/cgroup/cpu"
    assert backend.hierarchies["cpuacct"] == "/sys/fs/cgroup/cpuacct"


def test_a_pure_v1_host_gets_the_v1_backend_without_unified(tmp_path: Path) -> None:
    """Without a cgroup2 mount the v1 backend must kill through the freezer."""
    text = "\n".join(line for line in HYBRID.splitlines() if "cgroup2" not in line)
    backend = detect(mountinfo=mountinfo(tmp_path, text))
    assert isinstance(backend, V1Backend)
    assert backend.mode == "v1"
    assert backend.unified is None


def test_a_missing_v1_controller_is_a_problem_with_a_fix(tmp_path: Path) -> None:
    """doctor learns which controller to mount; pure v1 also needs the freezer."""
    root = tmp_path / "cgroup"
    for controller in ("cpu", "cpuacct", "memory"):
        (root / controller).mkdir(parents=True)
    (root / "memory" / "memory.kmem.tcp.limit_in_bytes").write_text("9223372036854771712\n")
    text = "".join(
        f"3{i} 1 0:3{i} / {root}/{c} rw - cgroup cgroup rw,{c}\n"
        for i, c in enumerate(("cpu", "cpuacct", "memory"))
    )
    backend = detect(root=str(root), mountinfo=mountinfo(tmp_path, text))
    problems = backend.problems()
    assert len(problems) == 2
    assert "'pids' is not mounted" in problems[0]
    assert "'freezer' is not mounted" in problems[1]
    with pytest.raises(OSError, match="not mounted: pids freezer"):
        backend.create("jigcmd-x", Limits())


def test_a_v1_memory_controller_without_tcp_accounting_is_a_problem(tmp_path: Path) -> None:
    """Without memory.kmem.tcp.limit_in_bytes a job's socket buffers would be charged to nobody."""
    root = tmp_path / "cgroup"
    controllers = ("cpu", "cpuacct", "memory", "pids", "freezer")
    for controller in controllers:
        (root / controller).mkdir(parents=True)
    text = "".join(
        f"3{i} 1 0:3{i} / {root}/{c} rw - cgroup cgroup rw,{c}\n" for i, c in enumerate(controllers)
    )
    problems = detect(root=str(root), mountinfo=mountinfo(tmp_path, text)).problems()
    assert len(problems) == 1
    assert "memory.kmem.tcp.limit_in_bytes" in problems[0]


def test_comounted_controllers_share_one_directory(tmp_path: Path) -> None:
    """cpu and cpuacct mounted together map to the same hierarchy."""
    backend = detect(mountinfo=mountinfo(tmp_path, COMOUNTED_V1))
    assert isinstance(backend, V1Backend)
    assert (
        backend.hierarchies["cpu"] == backend.hierarchies["cpuacct"] == "/sys/fs/cgroup/cpu,cpuacct"
    )


def test_cgroup2_at_the_root_is_the_v2_backend_with_the_base_below_it(tmp_path: Path) -> None:
    """A pure v2 host puts jobs under <root>/jigcmd."""
    backend = detect(mountinfo=mountinfo(tmp_path, PURE_V2))
    assert isinstance(backend, V2Backend)
    assert backend.mode == "v2"
    assert backend.base_path == "/sys/fs/cgroup/jigcmd"


def test_an_absolute_base_is_a_delegated_v2_subtree(tmp_path: Path) -> None:
    """Rootless use passes the delegated directory itself."""
    delegated = "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/jigcmd.command.service"
    backend = detect(base=delegated, mountinfo=mountinfo(tmp_path, PURE_V2))
    assert isinstance(backend, V2Backend)
    assert backend.base_path == delegated


def test_an_absolute_base_is_refused_on_v1(tmp_path: Path) -> None:
    """v1 has one tree per controller, so the base must be relative to each."""
    with pytest.raises(ValueError, match="relative"):
        detect(base="/elsewhere", mountinfo=mountinfo(tmp_path, HYBRID))


def test_no_cgroup_mount_is_reported_with_a_fix(tmp_path: Path) -> None:
    """A machine without cgroups cannot host an envelope."""
    with pytest.raises(CgroupUnavailable, match="mount -t cgroup2"):
        detect(mountinfo=mountinfo(tmp_path, "22 1 0:21 / / rw - ext4 /dev/sda1 rw\n"))


def test_mounts_outside_the_root_are_ignored(tmp_path: Path) -> None:
    """Only hierarchies below the given root count."""
    with pytest.raises(CgroupUnavailable):
        detect(root="/elsewhere", mountinfo=mountinfo(tmp_path, PURE_V2))


def test_mountinfo_escapes_are_decoded(tmp_path: Path) -> None:
    """A space in a mount point appears as \\040 in mountinfo."""
    text = "30 22 0:26 / /tmp/my\\040cgroup rw - cgroup2 cgroup2 rw\n"
    assert read_mounts(mountinfo(tmp_path, text))[0].point == "/tmp/my cgroup"


@pytest.mark.parametrize("name", ["jigcmd", "jigcmd-1a2b", "jigcmd_x.y"])
def test_job_names_starting_with_jigcmd_are_accepted(name: str) -> None:
    """One path component with the jigcmd prefix."""
    check_job_name(name)


@pytest.mark.parametrize(
    "name", ["", "other", "jigcmd/../x", "jigcmd x", "Jigcmd", "jigcmd" + "x" * 60]
)
def test_other_job_names_are_refused(name: str) -> None:
    """Anything that could escape the base or collide with foreign cgroups is refused."""
    with pytest.raises(ValueError, match="must match"):
        check_job_name(name)
