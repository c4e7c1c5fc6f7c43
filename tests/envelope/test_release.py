"""The release after a fence: pid 1 reaped, the job is removed at once (the removal is the proof).

Once pid 1 is reaped (its pidfd turned readable, `wait4` collected it), nothing can enter
the cgroup any more (a process joins by being forked by a member), so the release removes it
without a look first: the kernel refuses to remove a cgroup that still holds a task. When
pid 1 could not be reaped, the release waits for the cgroup to empty. Real cgroup jobs,
handled in a forked stand-in zygote (the envelope's "pid 1" is its child).
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from jigcmd.envelope import cgroups, lifecycle
from jigcmd.envelope.loop import EventLoop
from jigcmd.plan import Limits
from tests.envelope.standin import in_stand_in

pytestmark = pytest.mark.envelope


def _fence_and_release(
    backend: cgroups.CgroupBackend, *, member: bool, pidfd: bool = True
) -> dict[str, object]:
    """Fence and release an envelope whose job is empty (or holds a sleeping "pid 1")."""

    def body(report_w: int) -> None:
        envelope = lifecycle.Envelope(EventLoop(), backend, None, uuid.uuid4().hex[:16])
        job = backend.create(f"jigcmd-release-{uuid.uuid4().hex[:8]}", Limits())
        envelope.held.job = job
        looks: list[float] = []
        wait_empty = job.wait_empty

        def counted(timeout: float) -> bool:
            looks.append(timeout)
            return wait_empty(timeout)

        pytest.MonkeyPatch().setattr(job, "wait_empty", counted)
        child = 0
        if member:
            child = os.fork()
            if child == 0:
                try:
                    job.join(None)
                    os.execv("/bin/sleep", ["sleep", "60"])
                finally:
                    os._exit(127)
            while not job.populated():
                pass
            # As in a real envelope, the process the fence kills and waits for is the
            # zygote's child (pid 1).
            envelope.held.init_pid = child
            if pidfd:
                envelope.held.pidfd = os.pidfd_open(child)
        envelope.held.kill_and_wait()
        reaped = envelope.held.init_pid is None
        ok, problems = envelope._release()
        if child and not reaped:
            os.waitpid(child, 0)
        report = {
            "reaped": reaped,
            "looks": len(looks),
            "ok": ok,
            "problems": list(problems),
            "removed": not any(os.path.exists(path) for path in job.paths),
        }
        os.write(report_w, json.dumps(report).encode())

    seen: dict[str, object] = json.loads(in_stand_in(body))
    return seen


def test_an_empty_job_after_pid_1_is_released_on_one_look(
    real_cgroups: cgroups.CgroupBackend,
) -> None:
    report = _fence_and_release(real_cgroups, member=False)
    assert report == {"reaped": True, "looks": 0, "ok": True, "problems": [], "removed": True}


def test_a_killed_pid_1_reaped_through_its_pidfd_needs_no_wait(
    real_cgroups: cgroups.CgroupBackend,
) -> None:
    report = _fence_and_release(real_cgroups, member=True)
    assert report == {"reaped": True, "looks": 0, "ok": True, "problems": [], "removed": True}


def test_a_job_whose_pid_1_was_not_reaped_is_waited_for_before_removal(
    real_cgroups: cgroups.CgroupBackend,
) -> None:
    report = _fence_and_release(real_cgroups, member=True, pidfd=False)
    assert report == {"reaped": False, "looks": 1, "ok": True, "problems": [], "removed": True}
