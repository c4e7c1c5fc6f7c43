"""Benchmark jarvis over real loopback HTTP (uvicorn + httpx), against a bare posix_spawn.

Prints, from one run of this script:
- denied requests per second (policy evaluation + durable audit row, no process);
- allowed `/bin/true` runs per second through jarvis and the real envelope;
- bare `posix_spawn` + `waitpid` of `/bin/true` per second, for scale.

Usage (as root, on a machine that can build the envelope):
    python scripts/bench_jarvis.py [--denied 2000] [--allowed 100] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import httpx

from jigcmd.envelope.native import NativeExecutor
from jigcmd.jarvis.app import allowed_hosts, create_app
from jigcmd.jarvis.auth import Credentials, parse_capabilities
from jigcmd.jarvis.hostview import OsHostView
from jigcmd.jarvis.manual import base_url
from jigcmd.jarvis.policy import parse_policy
from jigcmd.jarvis.server import bind_loopback, serve
from jigcmd.jarvis.service import JarvisService
from jigcmd.journal.store import Journal

TOKEN = "jv_bench-0123456789abcdef0123456789"
POLICY = """
search_path = ["/usr/bin", "/bin"]
[[rule]]
name = "true"
decision = "allow"
argv0 = ["true"]
"""


def bare_spawns(count: int) -> float:
    """posix_spawn + waitpid of /bin/true, per second."""
    start = time.perf_counter()
    for _ in range(count):
        pid = os.posix_spawn("/bin/true", ["/bin/true"], {})
        os.waitpid(pid, 0)
    return count / (time.perf_counter() - start)


async def rate(count: int, concurrency: int, call: Callable[[], Awaitable[None]]) -> float:
    """Calls per second with `concurrency` callers sharing `count` calls."""
    remaining = count

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    return count / (time.perf_counter() - start)


async def bench(
    store: Journal, args: argparse.Namespace, failures: list[str]
) -> tuple[float, float]:
    executor = NativeExecutor()
    service = JarvisService(
        policy=parse_policy(POLICY),
        executor=executor,
        store=store,
        host=OsHostView(),
        host_env={},
    )
    sock = bind_loopback("127.0.0.1", 0)
    port = sock.getsockname()[1]
    base = base_url("127.0.0.1", port)
    credentials = Credentials(TOKEN, parse_capabilities(None))
    app = create_app(service, credentials, allowed_hosts("127.0.0.1", port), base)
    stop = anyio.Event()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(app, sock, credentials, stop=stop))
        limits = httpx.Limits(max_connections=args.concurrency)
        async with httpx.AsyncClient(base_url=base, headers=headers, limits=limits) as client:

            async def denied() -> None:
                body = {"tool": "jarvis.run.create", "args": {"argv": ["rm", "-rf", "/"]}}
                response = await client.post("/tools/jarvis.run.create", json=body)
                assert response.json()["decision"] == "deny"

            async def allowed() -> None:
                body = {"tool": "jarvis.run.create", "args": {"argv": ["true"]}}
                response = await client.post("/tools/jarvis.run.create", json=body)
                result = response.json()
                if result.get("status") != "exited":
                    failures.append(result.get("detail") or response.text)

            await rate(20, 1, allowed)  # warm-up: zygote, imports, page cache
            denied_rate = await rate(args.denied, args.concurrency, denied)
            allowed_rate = await rate(args.allowed, args.concurrency, allowed)
        stop.set()
    sock.close()
    return denied_rate, allowed_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--denied", type=int, default=2000)
    parser.add_argument("--allowed", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    spawn_rate = bare_spawns(500)
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="jigcmd-bench-") as tmp:
        state = Path(tmp)
        with Journal.open(state) as journal:
            journal_rates = anyio.run(bench, journal, args, failures)
    print(f"bare posix_spawn /bin/true           : {spawn_rate:8.1f} /s")
    deny, allow = journal_rates
    print(
        f"jarvis denied requests (durable audit): {deny:8.1f} /s  ({deny / spawn_rate:.2f}x bare)"
    )
    print(
        f"jarvis allowed /bin/true runs       : {allow:8.1f} /s  ({allow / spawn_rate:.3f}x bare)"
    )
    print(f"(concurrency {args.concurrency}; loopback HTTP, uvicorn + httpx keep-alive)")
    if failures:
        print(f"{len(failures)} allowed runs did not exit normally; first: {failures[0]}")


if __name__ == "__main__":
    main()
