"""A large host, for real: a 32-vCPU VM runs a realistic `bun test` suite through `jigcmd serve`.

One VM of `scripts/v2vm.py` with 32 vCPUs boots per session and runs `guest_largehost.py`,
which measures Bun's threads with and without the pin and drives a real server; these tests
read its `results.json`. The suite has three files, eight concurrent tests and a Worker.
Locally they skip when qemu or busybox is missing; under `CI` that is a failure. The
measurements stay in pytest's base directory, jigcmd-largehost-out*/results.json (pytest
keeps the last three; the figures in docs/deployment.md come from there).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scripts.v2vm import ROOT, GuestRun, VmUnavailable, missing_tools, run_in_vm
from tests.optional import missing_packages
from tests.required import unavailable

pytestmark = [pytest.mark.v2vm, pytest.mark.slow]

VCPUS = 32
# Boot (~60 s with 32 emulated vCPUs on two host cores), two bare runs, two envelope runs and
# a server's two calls, all emulated.
BUDGET_S = 900.0
GUEST = Path(__file__).with_name("guest_largehost.py")
PIDS_MAX = 64
SUITE_TESTS = 11  # eight concurrent, one Worker, two on data


@dataclass(frozen=True)
class LargeHost:
    """The VM run and what the guest measured."""

    run: GuestRun
    results: dict[str, Any]

    def details(self) -> str:
        """The tail of the guest's log and console, for failure messages."""
        log, console = self.run.log[-6000:], self.run.console[-2000:]
        return f"traces in {self.run.out_dir}\n--- guest log ---\n{log}\n--- console ---\n{console}"


@pytest.fixture(scope="session")
def large_host(tmp_path_factory: pytest.TempPathFactory) -> LargeHost:
    """Boot the 32-vCPU VM once and run the guest's measurements in it."""
    missing = missing_tools()
    if missing:
        unavailable(f"the 32-vCPU VM {missing_packages(missing)}")
    out = tmp_path_factory.mktemp("jigcmd-largehost-out")
    try:
        run = run_in_vm(
            [sys.executable, str(GUEST), str(out)],
            out_dir=out,
            cwd=ROOT,
            python=sys.executable,
            env={"CI": "true"},
            timeout=BUDGET_S,
            memory_mib=2048,
            cpus=VCPUS,
        )
    except VmUnavailable as e:
        unavailable(f"the VM cannot be built: {e}")
    path = out / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    host = LargeHost(run, results)
    raised = {k: v["raised"] for k, v in results.items() if isinstance(v, dict) and "raised" in v}
    assert run.status == 0 and results and not raised, f"{raised}\n{host.details()}"
    return host


def summary(results: dict[str, Any]) -> dict[str, Any]:
    """Peak threads and outcome of each way the suite ran, for the record."""

    def peak(reports: list[dict[str, Any]]) -> int:
        return max((r["peakThreads"] for r in reports), default=0)

    bare = {k: v["peak_threads_sampled"] for k, v in results["bare"].items()}
    envelope = {
        k: {"peak": peak(v["reports"]), "exit": v["exit_code"], "pids_hit": v["pids_limit_hit"]}
        for k, v in results["envelope"].items()
    }
    return {"nproc": results["nproc"], "bare": bare, "envelope": envelope}


def test_the_vm_has_many_cpus(large_host: LargeHost) -> None:
    """The guest really is a large host: 32 CPUs, which unpinned Bun reports as such."""
    assert large_host.results["nproc"] == VCPUS
    reports = large_host.results["bare"]["unpinned"]["reports"]
    assert {r["hardwareConcurrency"] for r in reports} == {VCPUS}, large_host.details()


def test_the_suite_passes_through_serve_within_the_task_limit(large_host: LargeHost) -> None:
    """Exit 0 with every test passing, the pids limit never hit, the peak below 64 tasks."""
    suite = large_host.results["serve"]["suite"]
    assert suite["is_error"] is False, suite["text"]
    evidence = suite["evidence"]
    assert evidence["exitCode"] == 0, suite["stderr"][-3000:]
    assert f"{SUITE_TESTS} pass" in suite["stderr"]
    assert suite["report"]["pidsLimitHit"] is False
    assert len(suite["reports"]) == 3, suite["reports"]
    assert max(r["peakThreads"] for r in suite["reports"]) < PIDS_MAX


def test_the_candidate_reports_one_cpu_through_serve(large_host: LargeHost) -> None:
    """navigator.hardwareConcurrency, os.cpus() and os.availableParallelism() all say 1."""
    reports = large_host.results["serve"]["suite"]["reports"]
    assert reports, large_host.details()
    for report in reports:
        seen = (report["hardwareConcurrency"], report["cpus"], report["availableParallelism"])
        assert seen == (1, 1, 1), report


def test_the_pin_holds_bun_to_fewer_threads_than_all_cpus_do(large_host: LargeHost) -> None:
    """In the envelope, the pinned suite peaks lower than the unpinned one on 32 CPUs."""
    envelope = large_host.results["envelope"]
    pinned = envelope["pinned"]
    assert pinned["exit_code"] == 0, pinned["stderr_tail"]
    assert {r["hardwareConcurrency"] for r in pinned["reports"]} == {1}

    def peak(run: dict[str, Any]) -> int:
        return max((r["peakThreads"] for r in run["reports"]), default=PIDS_MAX)

    assert peak(pinned) < peak(envelope["unpinned"]), summary(large_host.results)


def test_the_thread_bomb_is_still_contained(large_host: LargeHost) -> None:
    """Workers without end, pinned to one CPU, hit the pids limit; no job is left."""
    bomb = large_host.results["envelope"]["bomb"]
    assert bomb["pids_limit_hit"] is True, bomb
    assert bomb["stop_reason"] in ("exited", "deadline"), bomb
    assert large_host.results["jobs_left_after_envelope"]["jobs"] == []
    serve = large_host.results["serve"]
    assert serve["jobs_left"] == []
    assert serve["server_exit"] == 0, serve["server_stderr_tail"]
