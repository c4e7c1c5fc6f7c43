"""A namespace limit reached says so: the kernel's ENOSPC for a count of namespaces is not a
full disk. Each case runs `spawn_init` in a forked stand-in zygote inside a user namespace of
its own whose `user.max_<kind>_namespaces` it sets to 0 (the host's sysctls are untouched)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jigcmd.envelope import cgroups, netns, spawning
from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.failure import StepError
from tests.envelope.standin import in_stand_in

pytestmark = pytest.mark.envelope


def _own_user_namespace(kind: str) -> None:
    """Into a user namespace of this process's own, its `kind` namespaces limited to none.

    Its id maps are written from the parent namespace (a forked helper), as root there: a
    process writing its own gid map from inside must deny `setgroups`, which the zygote's
    first step needs.
    """
    me = os.getpid()
    go_r, go_w = os.pipe()
    helper = os.fork()
    if helper == 0:
        os.read(go_r, 1)
        Path(f"/proc/{me}/uid_map").write_text(f"0 {os.getuid()} 1")
        Path(f"/proc/{me}/gid_map").write_text(f"0 {os.getgid()} 1")
        os._exit(0)
    sc.unshare(sc.CLONE_NEWUSER)
    os.write(go_w, b"x")
    assert os.waitstatus_to_exitcode(os.waitpid(helper, 0)[1]) == 0
    Path(f"/proc/sys/user/max_{kind}_namespaces").write_text("0")


@pytest.mark.parametrize(
    ("kind", "step"), [("net", "network namespace"), ("user", "create namespaces")]
)
def test_a_namespace_count_reached_is_not_called_a_full_disk(
    fresh_job: cgroups.CgroupJob, kind: str, step: str
) -> None:
    request = netns.preload()

    def spawn(report_w: int) -> None:
        netns.use_request(request)
        _own_user_namespace(kind)
        if kind == "user":
            # The network namespace comes with the clone, as without root: back into the
            # host's, which a child user namespace may not enter, is not this case's step.
            spawning._ROOTLESS = True  # this stand-in process only
        try:
            pid, _ = spawning.spawn_init(fresh_job, (report_w,))
        except StepError as refused:
            os.write(report_w, f"{refused.step}\n{refused.error}".encode())
            return
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        os.write(report_w, b"spawned\n")

    seen_step, words = in_stand_in(spawn).decode().split("\n", 1)
    assert seen_step == step, words
    assert "No space left on device: a namespace limit is reached" in words, words
    assert "user.max_*_namespaces" in words and "not a full disk" in words, words
