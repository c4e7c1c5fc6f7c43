"""The watch's namespace checks: a namespace held by a process is found, a let-go one is not."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.lifetime.watch import hold_namespace, namespace_holders, wait_for
from tests.required import unavailable


@pytest.fixture
def in_new_netns() -> Iterator[subprocess.Popen[bytes]]:
    """A `sleep` in a network namespace of its own (util-linux `unshare`), killed at the end."""
    if os.geteuid() != 0:
        unavailable("needs root")
    unshare = shutil.which("unshare")
    if unshare is None:
        unavailable("needs util-linux unshare")
    child = subprocess.Popen([unshare, "--net", "--", "sleep", "60"])
    host = os.readlink("/proc/self/ns/net")
    wait_for(lambda: _net(child.pid) not in (None, host), 10, "the child's own netns")
    yield child
    child.kill()
    child.wait()


def _net(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def test_a_namespace_a_process_is_in_is_reported_held(
    in_new_netns: subprocess.Popen[bytes],
) -> None:
    link = _net(in_new_netns.pid)
    assert link is not None
    assert namespace_holders({link}) == {link: [in_new_netns.pid]}


def test_a_held_descriptor_keeps_the_namespace_but_is_no_holder(
    in_new_netns: subprocess.Popen[bytes],
) -> None:
    link = _net(in_new_netns.pid)
    assert link is not None
    fd = hold_namespace(in_new_netns.pid, "net", link)
    assert fd is not None
    try:
        in_new_netns.kill()
        in_new_netns.wait()
        # The namespace outlives its last process (our descriptor) and keeps its number.
        assert f"net:[{os.fstat(fd).st_ino}]" == link
        assert namespace_holders({link}) == {}
    finally:
        os.close(fd)


def test_hold_refuses_a_pid_whose_namespace_is_another(
    in_new_netns: subprocess.Popen[bytes],
) -> None:
    assert hold_namespace(in_new_netns.pid, "net", os.readlink("/proc/self/ns/net")) is None
