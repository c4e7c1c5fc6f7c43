"""What signing each run's statement costs: CPU and latency per run, with and without it.

One `CommandService` (the one `jigcmd serve` and `jigcmd run` use, with its journal, its
envelope and its host key; warmed up and told of each answer as `jigcmd serve` does) runs
the bundled example's `tests` command as durable calls, in rotating rounds that alternate
signing on and off, so that both modes see the same machine.
Per call: the latency (call to answer) and the server process's CPU (`process_time`: the
protocol-free service path, the journal commits and the signing; the envelope's own
processes are not this process). Then the signing alone: `Attester.attest` on a test run's
record, on one with both streams at the 64 KiB cap, and on the first with the CPU's caches
evicted before each signing (a server's are, by the Bun run between its calls: what a call
costs in the server is this figure, not the warm one). All in one run; ratios side by side.

Run as root: python scripts/bench_attest.py [--runs 30] [--rounds 6]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout without installing: make the repository's package importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jigcmd.attest.attester import Attester, RunRecord  # noqa: E402 - needs the path set up above
from jigcmd.attest.statement import RunFacts  # noqa: E402 - needs the path set up above
from jigcmd.command.service import CommandService  # noqa: E402 - needs the path set up above
from jigcmd.envelope.api import enforced  # noqa: E402 - needs the path set up above
from jigcmd.evidence import OUTPUT_CAP_BYTES, Evidence, ResourceReport, StreamText  # noqa: E402 - needs the path set up above
from jigcmd.plan import RunPlan, plan_digest  # noqa: E402 - needs the path set up above
from scripts.bench_call_pieces import durable_call, example_service  # noqa: E402 - likewise

# Written through before each cold signing: larger than the last-level cache of most hosts.
EVICT_BYTES = 128 << 20
_ids = itertools.count()


async def _one_call(service: CommandService, request: dict[str, object]) -> tuple[float, float]:
    """One durable call: (latency ms, this process's CPU ms)."""
    cpu, wall = time.process_time(), time.perf_counter()
    await durable_call(service, request, f"bench-{next(_ids)}", "bench-attest")
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


async def _rounds(
    service: CommandService, attester: Attester, request: dict[str, object], runs: int, rounds: int
) -> dict[str, tuple[list[float], list[float]]]:
    found: dict[str, tuple[list[float], list[float]]] = {"signed": ([], []), "unsigned": ([], [])}
    for _ in range(3):  # warm the zygote, the journal and the page cache
        await _one_call(service, request)
    for index in range(rounds * 2):
        mode = "signed" if index % 2 == 0 else "unsigned"
        service.attach_attester(attester if mode == "signed" else None)
        for _ in range(runs):
            latency, cpu = await _one_call(service, request)
            found[mode][0].append(latency)
            found[mode][1].append(cpu)
        # Let the closer thread finish the last row before the next round is timed.
        await anyio.sleep(0.2)
    service.attach_attester(attester)
    return found


def _record(plan: RunPlan, stream: str, kind: str) -> RunRecord:
    evidence = Evidence(
        candidate_digest="sha256:" + "a" * 64,
        command="tests",
        invocation=["bun", "test", "test/project.test.ts"],
        stdin_digest="sha256:" + "b" * 64,
        stdout=StreamText(text=stream, truncated=False),
        stderr=StreamText(text="(pass) value [0.2ms]\n" + stream, truncated=False),
        exit_code=0,
        signal=None,
        stop_reason="exited",
        cleanup="complete",
    )
    return RunRecord(
        run=RunFacts(run_id="0123456789abcdef", caller_run="bench", operation_id="op"),
        kind=kind,
        enforced=enforced(plan),
        plan_digest=plan_digest(plan),
        evidence=evidence,
        stdout=evidence.stdout.text.encode(),
        stderr=evidence.stderr.text.encode(),
        resources=ResourceReport(
            wall_ms=90.0,
            setup_ms=20.0,
            cpu_ms=8.0,
            peak_memory_bytes=1 << 22,
            oom_killed=False,
            pids_limit_hit=False,
            deadline_hit=False,
        ),
        started_unix_ms=1_764_619_240_552,
        finished_unix_ms=1_764_619_240_651,
    )


def _sign_alone(
    attester: Attester, plan: RunPlan, stream: str, kind: str, *, cold: bool = False
) -> tuple[float, int]:
    """Median µs of one `attest` and the bundle's size.

    `cold`: the CPU's caches are evicted before each (a buffer larger than this machine's
    caches is written through), as a server's are by the Bun run between two of its calls.
    """
    record = _record(plan, stream, kind)
    evict = bytearray(EVICT_BYTES) if cold else None
    times = []
    for _ in range(200 if cold else 400):
        if evict is not None:
            evict[::64] = bytes(len(evict[::64]))
        start = time.perf_counter()
        bundle = attester.attest(record)
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times), len(bundle)


async def _main(runs: int, rounds: int) -> None:
    async with example_service("jigcmd-bench-attest-") as (service, request):
        attester = service.attester
        assert attester is not None
        found = await _rounds(service, attester, request, runs, rounds)
        plan = service.template_plan()
        small = _sign_alone(attester, plan, "bun test v1.4.2\n", "test")
        large = _sign_alone(attester, plan, "x" * OUTPUT_CAP_BYTES, "test")
        cold = _sign_alone(attester, plan, "bun test v1.4.2\n", "test", cold=True)
    _report(found, runs, rounds, small=small, large=large, cold=cold)


def _report(
    found: dict[str, tuple[list[float], list[float]]],
    runs: int,
    rounds: int,
    *,
    small: tuple[float, int],
    large: tuple[float, int],
    cold: tuple[float, int],
) -> None:
    print(f"{runs} durable `tests` calls per round, {rounds} rounds per mode, alternating")
    medians = {
        mode: (statistics.median(latencies), statistics.median(cpus))
        for mode, (latencies, cpus) in found.items()
    }
    for mode, (latency, cpu) in medians.items():
        print(f"  {mode:9} latency median {latency:7.2f} ms   server CPU median {cpu:6.2f} ms")
    (sl, sc), (ul, uc) = medians["signed"], medians["unsigned"]
    print(
        f"  signed/unsigned: latency x{sl / ul:.3f} ({sl - ul:+.2f} ms), "
        f"server CPU x{sc / uc:.3f} ({sc - uc:+.2f} ms)"
    )
    print(f"signing alone (two statements, a test run): {small[0]:.0f} µs, bundle {small[1]} bytes")
    print(f"  with both streams at the 64 KiB cap: {large[0]:.0f} µs, bundle {large[1]} bytes")
    print(
        f"  with the caches evicted before each, as in a server between calls: {cold[0]:.0f} µs "
        f"(x{cold[0] / small[0]:.1f})"
    )


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30, help="calls per round (default 30)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds per mode (default 6)")
    options = parser.parse_args()
    anyio.run(_main, options.runs, options.rounds)


if __name__ == "__main__":
    main()
