"""Recovery's network-namespace check: a holder counts unless another envelope's job has it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest

from jigcmd.durable.recovery import in_other_job, netns_holders
from tests.required import unavailable

OURS = "jigcmd-0123456789abcdef"
OTHER = "jigcmd-fedcba9876543210"


def _hybrid(job: str, suffix: str = "") -> str:
    """A hybrid host's /proc/PID/cgroup for a process in `job` (v1 and unified)."""
    return "\n".join(
        [
            "9:name=systemd:/",
            f"8:pids:/jigcmd/{job}{suffix}",
            f"4:memory:/jigcmd/{job}{suffix}",
            f"1:cpu:/jigcmd/{job}{suffix}",
            f"0::/jigcmd/{job}{suffix}",
        ]
    )


def test_our_own_job_is_not_another() -> None:
    assert not in_other_job(_hybrid(OURS), OURS)


def test_another_envelopes_job_is_another_even_once_deleted() -> None:
    assert in_other_job(_hybrid(OTHER), OURS)
    assert in_other_job(_hybrid(OTHER, " (deleted)"), OURS)


def test_a_process_in_no_job_or_in_the_base_counts() -> None:
    assert not in_other_job("4:memory:/process_api/x\n0::/", OURS)
    assert not in_other_job("0::/jigcmd\n1:cpu:/jigcmd-u0", OURS)


@pytest.fixture
def own_netns_sleep() -> Iterator[tuple[int, str]]:
    """A `sleep` in a network namespace of its own, in no jigcmd job: (pid, `net:[inode]`)."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        unavailable("needs root and util-linux unshare")
    child = subprocess.Popen([unshare, "--net", "--", "sleep", "60"])
    host = os.readlink("/proc/self/ns/net")
    try:
        deadline = time.monotonic() + 10
        while (link := os.readlink(f"/proc/{child.pid}/ns/net")) == host:
            assert time.monotonic() < deadline, "unshare did not make its namespace"
            time.sleep(0.01)
        yield child.pid, link
    finally:
        child.kill()
        child.wait()


def test_a_holder_outside_every_job_is_reported(own_netns_sleep: tuple[int, str]) -> None:
    pid, link = own_netns_sleep
    assert netns_holders(link, OURS) == [pid]
