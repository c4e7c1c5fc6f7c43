"""How pid 1 is made: clone3 into its namespaces, or, with clone3 hidden, unshare and fork.

Each case runs `spawn_init` in a forked stand-in zygote (so the test process never
changes namespaces or groups), and pid 1 reports what it is from the inside.
"""

from __future__ import annotations

import errno
import os

import pytest

from jigcmd.envelope import cgroups, netns, spawning
from jigcmd.envelope import syscalls as sc
from tests.envelope.standin import in_stand_in

pytestmark = pytest.mark.envelope


def _hidden_clone3(flags: int, cgroup_fd: int | None = None) -> int:
    raise OSError(errno.ENOSYS, "clone3 hidden by a seccomp profile")


def _spawn_and_report(job: cgroups.CgroupJob, *, hide_clone3: bool) -> dict[str, str]:
    """Run `spawn_init` in a stand-in zygote; what pid 1 saw of itself, by key."""
    request = netns.preload()

    def spawn(report_w: int) -> None:
        netns.use_request(request)
        if hide_clone3:
            sc.clone = _hidden_clone3  # this stand-in process only
        pid, born_in = spawning.spawn_init(job, (report_w,))
        if pid == 0:
            lines = [
                f"pid={os.getpid()}",
                f"born_in={born_in}",
                f"user={os.readlink('/proc/self/ns/user')}",
                f"net={os.readlink('/proc/self/ns/net')}",
            ]
            os.write(report_w, "\n".join(lines).encode())
            os._exit(0)
        if os.waitpid(pid, 0)[1] != 0:
            raise RuntimeError("pid 1 failed to report")

    data = in_stand_in(spawn)
    return dict(line.split("=", 1) for line in data.decode().splitlines())


@pytest.mark.parametrize("hide_clone3", [False, True], ids=["clone3", "unshare-and-fork"])
def test_pid_1_is_made_in_fresh_namespaces_either_way(
    fresh_job: cgroups.CgroupJob, hide_clone3: bool
) -> None:
    """Pid 1 of a new pid namespace, in new user and network namespaces; born in cgroup2 or not."""
    seen = _spawn_and_report(fresh_job, hide_clone3=hide_clone3)
    assert seen["pid"] == "1"
    assert seen["user"] != os.readlink("/proc/self/ns/user")
    assert seen["net"] != os.readlink("/proc/self/ns/net")
    if hide_clone3 or fresh_job.birth_dir is None:
        assert seen["born_in"] == "None"
    else:
        assert seen["born_in"] == fresh_job.birth_dir
