"""Where a call's CPU goes inside the server, piece by piece, as the server pays it (cold).

One `CommandService` (the one `jigcmd serve` and `jigcmd run` use, with its journal, its
envelope and its host key), warmed up as `jigcmd serve` warms up (its zygote, a prepared
envelope, the runtime's check, the frozen heap) and told of each answer as the stdio server
tells it, runs the bundled example's `tests` command as durable calls, back to back. Before
the measured calls, each piece below is wrapped in place (the function on its class or
module, and every module's own reference to it): the wrapper adds the thread CPU
(`thread_time_ns`) spent inside the piece and counts its calls. Between two calls Bun runs
on the same cores, so every piece runs with the CPU's caches as the server finds them: cold,
at several times what a loop over the same piece says (`bench_attest.py`'s cold line).

Printed per call: each piece's calls and µs of CPU, and its share of this process's CPU per
call (`process_time`, every thread: the service path without the stdio protocol). An
indented piece runs inside the one above it. The wrappers cost ~1 µs a call each.

With `--count`, nothing is timed: the Python function calls a call makes are counted
(`sys.setprofile`), by where each function is defined, and the event loop's turns. A count
needs no clock and does not vary with the machine's load: it is how the twentieth round
found that most of a call's functions were the event loop's (docs/envelope.md).

Run as root: python scripts/bench_call_pieces.py [--calls 200] [--warm-up 20] [--count]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, ParamSpec, TypeVar

import anyio

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout without installing: make the repository's package importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from jigcmd.cancel import CancelSignal  # noqa: E402 - needs the path set up above
from jigcmd.command.assembly import FrontSettings, open_service  # noqa: E402 - needs the path set up above
from jigcmd.command.service import CommandService  # noqa: E402 - needs the path set up above
from jigcmd.envelope.native import NativeExecutor  # noqa: E402 - needs the path set up above
from jigcmd.frontends.lock import lock  # noqa: E402 - needs the path set up above
from jigcmd.frontends.run import read_candidate  # noqa: E402 - needs the path set up above

EXAMPLE = ROOT / "jigcmd" / "example"
P = ParamSpec("P")
R = TypeVar("R")
_ASYNCIO = "anyio._backends._asyncio"
# (label, module, qualified name); an indented label runs inside the piece above it.
PIECES = (
    ("the row's begin", "jigcmd.journal.store", "Journal.begin_now"),
    ("  its fdatasync (any durable write's)", "jigcmd.journal.database", "Database._sync_wal"),
    ("the evidence's commit", "jigcmd.journal.store", "Journal.record_result"),
    ("the row's close", "jigcmd.journal.store", "Journal.finish"),
    ("the evidence's sync: started", "jigcmd.journal.database", "Database.sync_soon"),
    ("the evidence's sync: collected", "jigcmd.journal.database", "Database.synced"),
    ("the signings (each a bundle)", "jigcmd.attest.attester", "Attester.attest"),
    ("  Ed25519 signatures", "jigcmd.attest.keys", "SigningKey.sign"),
    ("the request's validation", "jigcmd.policy.request", "validate_request"),
    ("the plan's digest", "jigcmd.plan", "plan_digest"),
    ("canonical JSON", "jigcmd.jsonio.canonical", "dumps"),
    ("the CPU placement", "jigcmd.command.service", "CommandService._place"),
    ("the evidence", "jigcmd.command.outcomes", "evidence_of"),
    ("the JUnit report's parse", "jigcmd.protocol.junit", "parse_junit"),
    ("the signed names: the report", "jigcmd.attest.testreport", "read_junit_report"),
    ("the signed names: the console", "jigcmd.attest.testreport", "read_console_report"),
    ("anyio: tasks spawned", _ASYNCIO, "TaskGroup.start_soon"),
    ("anyio: cancel scopes entered", _ASYNCIO, "CancelScope.__enter__"),
    ("anyio: cancel scopes left", _ASYNCIO, "CancelScope.__exit__"),
    ("anyio: events made", _ASYNCIO, "Event.__init__"),
)


@dataclass
class Tally:
    """The thread CPU spent inside one piece, and how often it ran."""

    ns: int = 0
    calls: int = 0


def _timed(function: Callable[P, R], tally: Tally) -> Callable[P, R]:
    clock = time.thread_time_ns

    def timed(*args: P.args, **kwargs: P.kwargs) -> R:
        start = clock()
        try:
            return function(*args, **kwargs)
        finally:
            tally.ns += clock() - start
            tally.calls += 1

    return timed


def install(pieces: tuple[tuple[str, str, str], ...]) -> dict[str, Tally]:
    """Wrap every piece where it is defined and wherever a module holds it by name."""
    tallies: dict[str, Tally] = {}
    for label, module_name, qualname in pieces:
        owner: Any = importlib.import_module(module_name)
        *path, name = qualname.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = getattr(owner, name)
        tally = tallies[label] = Tally()
        wrapped = _timed(original, tally)
        setattr(owner, name, wrapped)
        if not path:
            # A function imported by name elsewhere is called through that module's global.
            for module in list(sys.modules.values()):
                names = getattr(module, "__dict__", {})
                for key, value in list(names.items()):
                    if value is original:
                        names[key] = wrapped
    return tallies


async def durable_call(
    service: CommandService, request: dict[str, object], operation_id: str, root_run: str
) -> None:
    """One durable call, with its cancel and its answer reported as the stdio server has them."""
    await service.run(
        request,
        operation_id=operation_id,
        deadline_unix_ms=None,
        cancel=CancelSignal(),
        signature=root_run,
        root_run=root_run,
    )
    # The zygote's refill waits for it: without it every launch would go to an envelope
    # made for it, not a prepared one.
    service.answered()


async def start_as_serve_does(service: CommandService) -> None:
    """The zygote, a prepared envelope and the runtime's check, as `jigcmd serve` warms up."""
    executor = service.executor
    assert isinstance(executor, NativeExecutor)
    await executor.start()
    await executor.prepare(service.template_plan())
    service.catalog.warm_up()
    gc.collect()
    gc.freeze()


@asynccontextmanager
async def example_service(prefix: str) -> AsyncIterator[tuple[CommandService, dict[str, object]]]:
    """A service of a locked copy of the bundled example, warmed up, and a passing request."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        example = work / "example"
        shutil.copytree(EXAMPLE, example)
        binding = example / "binding.toml"
        # The lock's review goes to stdout; the measurements follow it.
        assert lock(binding, None, check=False) == 0
        files = read_candidate(example / "candidates" / "passing")
        settings = FrontSettings(binding=binding, state_dir=work / "state")
        async with open_service(settings) as assembly:
            await start_as_serve_does(assembly.service)
            yield assembly.service, {"command": "tests", "files": files}
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def _measure(calls: int, warm_up: int) -> tuple[dict[str, Tally], float]:
    async with example_service("jigcmd-bench-pieces-") as (service, request):
        for index in range(warm_up):
            await durable_call(service, request, f"pieces-{index}", "bench-call-pieces")
        tallies = install(PIECES)
        cpu = time.process_time()
        for index in range(warm_up, warm_up + calls):
            await durable_call(service, request, f"pieces-{index}", "bench-call-pieces")
        cpu_ms = (time.process_time() - cpu) * 1000 / calls
    return tallies, cpu_ms


# Where a function is defined, by a part of its file's path (the first that matches).
_PLACES = (
    ("asyncio", "/asyncio/"),
    ("anyio", "/anyio/"),
    ("jigcmd", "/jigcmd/"),
    ("other libraries", "site-packages"),
)
_TURN = "_run_once"


def _place(filename: str) -> str:
    for place, part in _PLACES:
        if part in filename:
            return place
    return "the standard library"


async def _count(calls: int, warm_up: int) -> Counter[str]:
    """The Python function calls of `calls` calls, by place, and the loop's turns."""
    counts: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call":
            code = frame.f_code
            counts[_place(code.co_filename)] += 1
            if code.co_name == _TURN:
                counts["(the event loop's turns)"] += 1

    async with example_service("jigcmd-bench-pieces-") as (service, request):
        for index in range(warm_up):
            await durable_call(service, request, f"pieces-{index}", "bench-call-pieces")
        sys.setprofile(profile)
        threading.setprofile(profile)
        try:
            for index in range(warm_up, warm_up + calls):
                await durable_call(service, request, f"pieces-{index}", "bench-call-pieces")
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
    return counts


def _report_counts(counts: Counter[str], calls: int) -> None:
    turns = counts.pop("(the event loop's turns)", 0)
    print(f"{calls} durable `tests` calls back to back; Python function calls a call")
    print(f"{'defined in':26} {'calls':>8}")
    for place, count in counts.most_common():
        print(f"{place:26} {count / calls:8.1f}")
    print(f"{'all':26} {sum(counts.values()) / calls:8.1f}")
    print(f"the event loop's turns a call: {turns / calls:.1f}")


def _report(tallies: dict[str, Tally], cpu_ms: float, calls: int) -> None:
    print(f"{calls} durable `tests` calls back to back; this process's CPU {cpu_ms:.2f} ms a call")
    print(f"{'piece':42} {'calls':>6} {'µs':>8} {'share':>6}")
    for label, tally in tallies.items():
        us = tally.ns / calls / 1000
        share = us / (cpu_ms * 1000) * 100 if cpu_ms else 0.0
        print(f"{label:42} {tally.calls / calls:6.1f} {us:8.1f} {share:5.1f}%")


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200, help="measured calls (default 200)")
    parser.add_argument("--warm-up", type=int, default=20, help="calls before (default 20)")
    parser.add_argument(
        "--count", action="store_true", help="count Python function calls instead of timing"
    )
    options = parser.parse_args()
    if options.count:
        _report_counts(anyio.run(_count, options.calls, options.warm_up), options.calls)
        return
    tallies, cpu_ms = anyio.run(_measure, options.calls, options.warm_up)
    _report(tallies, cpu_ms, options.calls)


if __name__ == "__main__":
    main()
