"""The CPU pin: the candidate runs on, and reads as its CPU count, the CPUs its plan names.

Through the real envelope: the affinity mask pid 1 sets before the candidate execs, and the
job's cpuset where the host offers one (v1 cpuset here, cgroup v2 cpuset in the VM), which
the candidate cannot widen. A pin the kernel refuses fails closed: nothing runs.
"""

from __future__ import annotations

import contextlib
import json
import os

import pytest

from jigcmd.cancel import CancelSignal
from jigcmd.command.failures import envelope_error
from jigcmd.envelope.api import EnvelopeFailure, EnvelopeIdentity, FailureKind
from jigcmd.errors import Code
from jigcmd.plan import RunPlan
from tests.envelope.hostile_harness import TracedExecutor, attempts, probe_plan

pytestmark = pytest.mark.envelope

HOST_CPUS = sorted(os.sched_getaffinity(0))
SCHED_SETAFFINITY = 203  # x86_64

# What the runtime reports, and what the kernel says the process may run on.
REPORT_TS = r"""
import os from "node:os";
import { readFileSync } from "node:fs";
const status = readFileSync("/proc/self/status", "utf8");
const allowed = status.split("\n").find((l) => l.startsWith("Cpus_allowed_list:"))!;
console.log(JSON.stringify({
  hardwareConcurrency: navigator.hardwareConcurrency,
  cpus: os.cpus().length,
  availableParallelism: os.availableParallelism(),
  allowed: allowed.split(":")[1].trim(),
}));
"""

# Asks the kernel for every CPU of a 64-bit mask, then reports where it may run.
WIDEN_TS = r"""
import { readFileSync } from "node:fs";
import { attemptSys } from "./probe.ts";
const mask = Buffer.alloc(8, 0xff);
attemptSys("widen", SCHED_SETAFFINITY, 0, 8, mask);
const status = readFileSync("/proc/self/status", "utf8");
console.log(JSON.stringify({
  allowed: status.split("\n").find((l) => l.startsWith("Cpus_allowed_list:"))!.split(":")[1].trim(),
}));
""".replace("SCHED_SETAFFINITY", str(SCHED_SETAFFINITY))


def pinned(source: str, cpus: tuple[int, ...]) -> RunPlan:
    """A probe plan whose candidate is pinned to `cpus`."""
    return probe_plan(source)._replace(cpus=cpus)


def last_json(stdout: bytes) -> dict[str, object]:
    """The last JSON object the candidate printed."""
    lines = [line for line in stdout.decode().splitlines() if line.startswith('{"')]
    assert lines, stdout
    found: dict[str, object] = json.loads(lines[-1])
    return found


@pytest.mark.parametrize("cpu", HOST_CPUS[:2])
async def test_a_candidate_pinned_to_one_cpu_reads_one_cpu_and_runs_only_there(
    envelope: TracedExecutor, cpu: int
) -> None:
    """navigator.hardwareConcurrency, os.cpus() and os.availableParallelism() all say 1."""
    outcome = await envelope.run(pinned(REPORT_TS, (cpu,)))
    assert outcome.exit_code == 0, outcome.stderr.data
    assert last_json(outcome.stdout.data) == {
        "hardwareConcurrency": 1,
        "cpus": 1,
        "availableParallelism": 1,
        "allowed": str(cpu),
    }


async def test_where_the_host_offers_a_cpuset_the_candidate_cannot_widen_its_pin(
    envelope: TracedExecutor,
) -> None:
    """The job's cpuset holds the plan's CPU, the backend's record of live pins lists it, and
    asking the kernel for all CPUs leaves the candidate there."""
    if len(HOST_CPUS) < 2:
        pytest.skip("needs two CPUs to widen to")
    paths: list[str] = []
    cpusets: list[str] = []

    recorded: list[tuple[int, ...]] = []

    def on_started(identity: EnvelopeIdentity) -> None:
        # While the job exists: what its cpuset says, and what the backend's record says.
        paths.extend(identity.cgroup_paths)
        for path in paths:
            with contextlib.suppress(FileNotFoundError), open(f"{path}/cpuset.cpus") as f:
                cpusets.append(f.read().strip())
        recorded.extend(envelope.backend.pins())

    cpu = HOST_CPUS[-1]
    outcome = await envelope.run(pinned(WIDEN_TS, (cpu,)), CancelSignal(), on_started)
    assert outcome.exit_code == 0, outcome.stderr.data
    if not cpusets:
        pytest.skip(f"this host offers no cpuset to jobs {paths}: the affinity mask is the pin")
    # The kernel accepts the call and intersects the mask with the job's cpuset.
    assert cpusets == [str(cpu)]
    # The record placement reads (other sessions' envelopes may be in it too).
    assert (cpu,) in recorded
    assert attempts(outcome.stdout.data.decode())["widen"].ok
    assert last_json(outcome.stdout.data) == {"allowed": str(cpu)}


async def test_a_pin_to_a_cpu_the_host_lacks_fails_closed_and_nothing_runs(
    envelope: TracedExecutor,
) -> None:
    """A setup failure naming the cpu pin: EXECUTION_FAILED, and the marker never appears."""
    absent = max(HOST_CPUS) + 1
    with pytest.raises(EnvelopeFailure) as caught:
        await envelope.run(pinned('console.log("ran");\n', (absent,)))
    assert caught.value.kind is FailureKind.SETUP_FAILED
    error = envelope_error(caught.value)
    assert error.code == Code.EXECUTION_FAILED
    assert "cpu pin" in error.message
    assert "nothing ran" in error.message
