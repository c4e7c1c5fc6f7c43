"""A clean exit of `serve` leaves nothing its killed envelopes left; a proved cleanup is recorded.

A supervisor or pid 1 killed from outside mid-run is answered UNCERTAIN at once. Whatever the
kill left (the run's cgroup job, the envelope's registry entry) is released by the server's
own clean exit with the proof `jigcmd recover` uses, so that the instant the server has
exited nothing is left, without a restart or a `recover`.
"""

from __future__ import annotations

import signal
import uuid
from typing import Any

import pytest

from jigcmd.journal.envelopes import EnvelopeRegistry
from tests.lifetime.candidates import LINGER, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig
from tests.lifetime.watch import Proc, parent

pytestmark = pytest.mark.envelope


# Lets a child of its own be OOM-killed by the job (it fills memory), then lingers as LINGER
# does: its SIGTERM handler, which `Rig.candidate` waits for, comes after the child's end.
_LINGER_AFTER_AN_OOM_KILL = """
import { writeFileSync } from "fs";
const fill = "for (const a = []; ; ) a.push(Buffer.alloc(16 << 20, 1));";
writeFileSync("/tmp/hog.js", fill);
const hog = Bun.spawnSync([process.execPath, "/tmp/hog.js"]);
console.log("hog " + hog.signalCode);
process.on("SIGTERM", () => process.exit(0));
setInterval(() => {}, 1000);
"""


def _killed_mid_run(rig: Rig, which: str, source: str = LINGER) -> tuple[str, dict[str, Any]]:
    """A lingering run whose supervisor (or pid 1) is SIGKILLed; the server's answer."""
    token = f"tok-{uuid.uuid4().hex}"
    server = rig.serve()
    rig.prepared(server)
    request_id = rig.next_id("call")
    server.send(flow_call(request_id, "op-killed", cli_input(source, token)))
    candidate = rig.candidate(token)
    victim: Proc | None = (
        rig.supervisor("op-killed") if which == "supervisor" else parent(candidate)
    )
    assert victim is not None
    rig.signal(victim, signal.SIGKILL)
    answer = server.answer(request_id)
    assert answer["error"]["data"]["code"] == "UNCERTAIN", answer
    assert server.close_input() == 0
    return token, answer


def test_a_killed_supervisors_job_and_registry_entry_are_gone_when_serve_has_exited(
    rig: Rig,
) -> None:
    """At the instant of exit: no cgroup job of the run, no registry entry, cleanup proved."""
    _killed_mid_run(rig, "supervisor")
    row = rig.row("op-killed")
    assert row is not None and row.state == "uncertain"
    assert rig.backend.open(row.cgroup_job) is None, f"{row.cgroup_job} left"
    assert EnvelopeRegistry(rig.state_dir).entries() == []
    assert (row.cleanup, row.problems) == ("complete", "")
    rig.assert_nothing_left()


def test_a_killed_pid_1_whose_cleanup_was_proved_is_recorded_as_proved(rig: Rig) -> None:
    """The supervisor proved the envelope empty: the row says cleanup complete, not failed."""
    _, answer = _killed_mid_run(rig, "pid1")
    assert "the envelope was cleaned up" in answer["error"]["message"]
    # No OOM kill in the job: the kill came from outside (not the memory limit).
    assert "ended (killed from outside); the candidate ran," in answer["error"]["message"]
    row = rig.row("op-killed")
    assert row is not None and row.state == "uncertain"
    assert (row.cleanup, row.problems) == ("complete", "")
    rig.assert_nothing_left()


def test_a_killed_pid_1_after_an_oom_kill_in_its_job_is_not_blamed_on_the_oom_killer(
    rig: Rig,
) -> None:
    """A child OOM-killed earlier, then pid 1 SIGKILLed from outside: the job's OOM count says
    only that some process of it was OOM-killed, so the answer says pid 1 may have been one."""
    _, answer = _killed_mid_run(rig, "pid1", _LINGER_AFTER_AN_OOM_KILL)
    assert answer["error"]["message"].startswith(
        "pid 1 of the envelope died without reporting how the candidate ended: the kernel's "
        "OOM killer killed at least one process of the job (memory limit 256 MiB) and may have "
        "killed pid 1; the candidate ran, its own exit status is unknown"
    ), answer
    row = rig.row("op-killed")
    assert row is not None and row.state == "uncertain"
    rig.assert_nothing_left()
