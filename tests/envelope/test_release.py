"""The release after a fence: one look at the cgroup's membership, not two.

When pid 1 exited by itself and was reaped, the fence reads the cgroup's membership; empty,
nothing can enter it any more (a process joins by being forked by a member), so the release
removes it without reading the membership again (each look reads every hierarchy's files).
When the fence had to kill, the release still waits for the cgroup to empty. Real (empty)
cgroup jobs, handled in a forked stand-in supervisor (the release reaps its children).
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from jigcmd.envelope import cgroups, lifecycle
from jigcmd.plan import Limits
from tests.envelope.conftest import in_stand_in

pytestmark = pytest.mark.envelope


def _fence_and_release(backend: cgroups.CgroupBackend, *, member: bool) -> dict[str, object]:
    """Fence and release an envelope whose job is empty (or holds a sleeping "pid 1")."""

    def body(report_w: int) -> None:
        envelope = lifecycle._Envelope(backend)
        job = backend.create(f"jigcmd-release-{uuid.uuid4().hex[:8]}", Limits())
        envelope.job = job
        looks: list[float] = []
        wait_empty = job.wait_empty

        def counted(timeout: float) -> bool:
            looks.append(timeout)
            return wait_empty(timeout)

        pytest.MonkeyPatch().setattr(job, "wait_empty", counted)
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
            # stand-in's child (pid 1); anything else in the job is the kernel's to reap.
            envelope.init_pid = child
        envelope._fence()
        confirmed = envelope.confirmed_empty
        ok, problems = envelope._release()
        report = {
            "confirmed": confirmed,
            "looks": len(looks),
            "ok": ok,
            "problems": list(problems),
            "removed": not any(os.path.exists(path) for path in job.paths),
            "reset": envelope.confirmed_empty,
        }
        os.write(report_w, json.dumps(report).encode())

    seen: dict[str, object] = json.loads(in_stand_in(body))
    return seen


def test_an_empty_job_after_pid_1_is_released_on_the_fences_look(
    real_cgroups: cgroups.CgroupBackend,
) -> None:
    report = _fence_and_release(real_cgroups, member=False)
    assert report == {
        "confirmed": True,
        "looks": 0,
        "ok": True,
        "problems": [],
        "removed": True,
        "reset": False,
    }


def test_a_job_the_fence_had_to_kill_is_waited_for_before_removal(
    real_cgroups: cgroups.CgroupBackend,
) -> None:
    report = _fence_and_release(real_cgroups, member=True)
    assert report == {
        "confirmed": False,
        "looks": 1,
        "ok": True,
        "problems": [],
        "removed": True,
        "reset": False,
    }
