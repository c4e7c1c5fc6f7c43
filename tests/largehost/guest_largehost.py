"""Inside the many-vCPU VM: Bun's thread count with and without the pin, and the suite via serve.

Run by `test_largehost.py` through `scripts/v2vm.py` (never collected by pytest: the name has
no `test_` prefix). Writes `results.json` into the directory given as its one argument:

- `nproc`: the CPUs the VM has;
- `bare`: the suite under plain `bun test`, every CPU and `taskset` to one (peak threads);
- `envelope`: on one executor, a warm-up run of the suite, then the suite in the envelope
  unpinned (`cpus=()`) and pinned to one CPU, and the thread bomb pinned (with a deadline
  longer than serve's 10 s ceiling: emulated, starting dozens of Workers takes that long);
- `serve`: through `jigcmd serve` (MCP), the suite, with what the server reported and
  whether any job was left.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec

from jigcmd import __version__
from jigcmd.cancel import CancelSignal
from jigcmd.command.runtime import BUN_TARGET, find_runtime
from jigcmd.envelope.api import RunOutcome
from jigcmd.envelope.cgroups import detect
from jigcmd.envelope.cgroups.files import poll_until
from jigcmd.envelope.native import NativeExecutor
from jigcmd.frontends.servechild import ServeChild
from jigcmd.plan import RunPlan
from jigcmd.policy.planner import candidate_plan

HERE = Path(__file__).resolve().parent
SUITE = HERE / "suite"
EXAMPLE = HERE.parents[1] / "jigcmd" / "example"
TESTS = ("test/concurrent.test.ts", "test/worker.test.ts", "test/data.test.ts")
BINDING = f"""package = "repair"
[commands]
suite = {{ test = {json.dumps(list(TESTS))} }}
hello = {{ run = "src/hello.ts" }}
"""
# Emulated: Python and Bun start up to 40x slower than on the host.
ANSWER_S = 240.0
ENVELOPE_S = 60.0


def files() -> dict[str, str]:
    """The candidate tree, as a request carries it."""
    return {str(path.relative_to(SUITE)): path.read_text() for path in sorted(SUITE.rglob("*.ts"))}


def reports(stdout: str) -> list[dict[str, Any]]:
    """The JSON lines the suite's files printed."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith('{"file"')]


def peak_threads(pid: int, stop: threading.Event, seen: list[int]) -> None:
    """Sample `pid`'s thread count every millisecond until `stop`; keep the maximum."""
    while not stop.is_set():
        try:
            seen.append(len(os.listdir(f"/proc/{pid}/task")))
        except FileNotFoundError:
            return
        time.sleep(0.001)


def bare(pin: list[str]) -> dict[str, Any]:
    """The suite under plain `bun test` (no envelope), optionally under `taskset`."""
    with tempfile.TemporaryDirectory(prefix="jigcmd-largehost-") as work:
        shutil.copytree(SUITE, work, dirs_exist_ok=True)
        started = time.monotonic()
        process = subprocess.Popen(
            [*pin, find_runtime().path, "test", *(f"./{t}" for t in TESTS)],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stop, seen = threading.Event(), [0]
        sampler = threading.Thread(target=peak_threads, args=(process.pid, stop, seen))
        sampler.start()
        stdout, stderr = process.communicate(timeout=ANSWER_S)
        stop.set()
        sampler.join()
    return {
        "exit_code": process.returncode,
        "seconds": time.monotonic() - started,
        "peak_threads_sampled": max(seen),
        "reports": reports(stdout),
        "stderr_tail": stderr[-2000:],
    }


def envelope_plan(cpus: tuple[int, ...], kind: str = "test") -> RunPlan:
    """The suite (or the thread bomb, `kind` "run") as the envelope runs it, pinned to `cpus`."""
    return candidate_plan(
        bun=BUN_TARGET,
        runtime_binds=find_runtime().binds,
        kind=kind,
        paths=TESTS if kind == "test" else ("src/bomb.ts",),
        args=(),
        files=tuple(files().items()),
        stdin="",
        # Longer than serve's 10 s ceiling: unpinned, the suite may need it to finish at all
        # on an emulated 32-CPU machine, and its threads are what is measured here.
        deadline=time.monotonic() + ENVELOPE_S,
        cpus=cpus,
    )


def outcome_record(plan: RunPlan, outcome: RunOutcome) -> dict[str, Any]:
    """What one run in the envelope showed: how it ended, its accounting, the suite's reports."""
    stderr = outcome.stderr.data.decode("utf-8", "replace")
    return {
        "cpus": list(plan.cpus),
        "exit_code": outcome.exit_code,
        "stop_reason": outcome.stop_reason,
        "pids_limit_hit": outcome.report.pids_limit_hit,
        "wall_ms": outcome.report.wall_ms,
        "cpu_ms": outcome.report.cpu_ms,
        "reports": reports(outcome.stdout.data.decode("utf-8", "replace")),
        "stderr_tail": stderr[-2000:],
    }


async def in_envelope(last: int) -> dict[str, Any]:
    """The suite unpinned and pinned to CPU `last`, then the bomb pinned, on one executor.

    A warm-up run of the suite comes first, recorded apart, as serve's warm-up call does: the
    zygote stages its own copy of Bun, and under emulation the first run from a fresh copy
    pays for qemu translating Bun's code anew (its translation cache is keyed by the guest's
    physical pages), seconds the guest counts as the job's CPU (docs/envelope.md).
    """
    executor = NativeExecutor()
    # Started before any deadline is set: the zygote's start-up is slow under emulation.
    await executor.start()
    runs: dict[str, tuple[tuple[int, ...], str]] = {
        "warm_up": ((), "test"),
        "unpinned": ((), "test"),
        "pinned": ((last,), "test"),
        "bomb": ((last,), "run"),
    }
    results: dict[str, Any] = {}
    try:
        for name, (cpus, kind) in runs.items():
            plan = envelope_plan(cpus, kind)
            results[name] = outcome_record(plan, await executor.execute(plan, CancelSignal()))
    finally:
        await executor.aclose()
    return results


def stream_text(view: object) -> str:
    """What the model reads of one stream: its head and tail (the whole of a short one)."""
    if not isinstance(view, dict):
        return ""
    return str(view.get("head", "")) + str(view.get("tail", ""))


def call(server: ServeChild, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tools/call: the evidence, the report and whether it was an error."""
    response = server.request("tools/call", {"name": name, "arguments": arguments})
    result = response.get("result") or {}
    evidence = result.get("structuredContent") or {}
    return {
        "error": response.get("error"),
        "is_error": result.get("isError"),
        "text": [c.get("text", "")[:2000] for c in result.get("content", [])],
        "evidence": evidence,
        "report": (result.get("_meta") or {}).get("jigcmd/report"),
        "stderr": stream_text(evidence.get("stderr")),
        "reports": reports(stream_text(evidence.get("stdout"))),
    }


def jobs_left() -> list[str]:
    """Job cgroups still present a while after the server closed (none expected)."""
    # Envelopes the server had prepared ahead fence themselves once it is gone.
    poll_until(lambda: not detect().list_jobs(), 60.0)
    return detect().list_jobs()


def through_serve() -> dict[str, Any]:
    """The suite and the thread bomb through a real `jigcmd serve` child, over MCP."""
    with tempfile.TemporaryDirectory(prefix="jigcmd-largehost-") as work:
        root = Path(work)
        shutil.copytree(EXAMPLE / "repair", root / "repair")
        binding = root / "binding.toml"
        binding.write_text(BINDING)
        locked = subprocess.run(
            [sys.executable, "-m", "jigcmd", "lock", "--binding", str(binding)],
            capture_output=True,
            text=True,
            check=False,
        )
        if locked.returncode != 0:
            return {"lock_failed": locked.stdout + locked.stderr}
        # Its own state directory: the guest sees the host's default one, of any version.
        state = ["--state-dir", str(root / "state")]
        with ServeChild(binding, timeout=ANSWER_S, args=state) as server:
            server.request(
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "jigcmd-largehost", "version": __version__},
                },
            )
            server.notify("notifications/initialized", None)
            # The first call hashes the Bun binary (the deferred admission check) within its
            # own deadline: emulated, that alone can exhaust it. Measured calls come after.
            warm_up = call(server, "hello", {"files": files()})
            # And the first `bun test` from this server's staged copy of Bun is qemu's to
            # translate anew (docs/envelope.md, the 32-vCPU VM), seconds of the 10 s ceiling:
            # the envelope step warms up the same way. The measured suite is the second.
            suite_warm_up = call(server, "suite", {"files": files()})
            suite = call(server, "suite", {"files": files()})
            closed = server.close(ANSWER_S)
            stderr = server.stderr()
    return {
        "warm_up": warm_up,
        "suite_warm_up": suite_warm_up,
        "suite": suite,
        "server_exit": closed,
        "server_stderr_tail": stderr[-2000:],
        "jobs_left": jobs_left(),
    }


def main(out: Path) -> int:
    """Measure everything, writing results.json after each step; 1 if a step raised."""
    last = max(os.sched_getaffinity(0))
    steps: dict[str, Callable[[], dict[str, Any]]] = {
        "bare": lambda: {"unpinned": bare([]), "taskset_one_cpu": bare(["taskset", "-c", "0"])},
        # The bomb: Workers without end, pinned as serve pins, still held at the pids limit.
        "envelope": lambda: anyio.run(in_envelope, last),
        "jobs_left_after_envelope": lambda: {"jobs": jobs_left()},
        "serve": through_serve,
    }
    results: dict[str, Any] = {"nproc": len(os.sched_getaffinity(0))}
    status = 0
    for name, step in steps.items():
        try:
            results[name] = step()
        except Exception:  # noqa: BLE001 - recorded for the host, which fails the test
            results[name] = {"raised": traceback.format_exc()}
            status = 1
        (out / "results.json").write_bytes(msgspec.json.format(msgspec.json.encode(results)))
    return status


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
