"""The jarvis phases of `scripts/soak_hostile.py`: a real `jigcmd jarvis` under hostile neighbours.

Each phase runs against its own `jigcmd jarvis` child (a temporary state directory, a policy
that allows `echo`) and prints the connections jarvis held (its socket descriptors, sampled
every 50 ms, the peak), the authorized `jarvis.policy.check` calls answered and their p99,
and the server's RSS before and after:

- half-open: jarvis's descriptor limit set to 256 (prlimit), then connections that send
  `POST /tools/jarvis.policy.check HTTP/1.1` and `Host` and nothing more, held while
  authorized calls are made one after another;
- concurrent: that many authorized calls at once, each on its own connection (an answer is
  200, or 503 at accept when every held connection stays busy: answered either way; each
  call's audit row is a durable commit, so the burst takes its turn at the journal);
- slow body: connections with an authorized head that send their body a byte every half
  second (jarvis closes them with 408 at its body deadline), while authorized calls are made.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import re
import resource
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["JarvisPhase", "concurrent", "half_open", "slow_body"]

REPO = Path(__file__).resolve().parents[1]
TOKEN = f"jv_soak-{secrets.token_hex(8)}"
POLICY = """search_path = ["/usr/bin", "/bin"]
[[rule]]
name = "echo"
decision = "allow"
argv0 = ["echo"]
"""
# One authorized call's failsafe: an answer slower than this counts as not answered.
ANSWER_S = 5.0
# The failsafe of one call of a burst (it may wait for its turn: the audit is durable).
BURST_S = 60.0
# Why calls got no answer, by exception (printed when a phase loses calls).
_FAILURES: collections.Counter[str] = collections.Counter()
_SERVING = re.compile(r"serving http://127\.0\.0\.1:(\d+)/utcp")
_START_S = 60.0


@dataclass(frozen=True)
class JarvisPhase:
    """What one phase measured."""

    name: str
    held_peak: int
    answered: int
    asked: int
    p99_ms: float | None
    rss_before_kib: int
    rss_after_kib: int
    note: str


def rss_kib(pid: int) -> int:
    """The process's resident set size in KiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def sockets_held(pid: int) -> int:
    """How many socket descriptors `pid` holds now."""
    count = 0
    for name in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                count += 1
    return count


@contextlib.contextmanager
def jarvis_child(scratch: Path) -> Iterator[tuple[int, int]]:
    """A real `jigcmd jarvis` on a free loopback port; (pid, port). SIGTERM at the end."""
    scratch.mkdir()
    (scratch / "policy.toml").write_text(POLICY)
    stderr_path = scratch / "jarvis.stderr"
    with stderr_path.open("wb") as stderr:
        child = subprocess.Popen(
            [
                *(sys.executable, "-m", "jigcmd", "jarvis", "--port", "0"),
                *("--policy", str(scratch / "policy.toml"), "--state-dir", str(scratch / "s")),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "JARVIS_BEARER_TOKEN": TOKEN, "PYTHONPATH": str(REPO)},
        )
    try:
        deadline = time.monotonic() + _START_S
        while not (found := _SERVING.search(stderr_path.read_text("utf-8", "replace"))):
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"jarvis did not start: {stderr_path.read_text()[-2000:]}")
            time.sleep(0.05)
        yield child.pid, int(found.group(1))
        child.send_signal(signal.SIGTERM)
        if child.wait(timeout=60) != 0:
            raise RuntimeError(f"jarvis exited {child.returncode}: {stderr_path.read_text()}")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


class _Sampler:
    """The peak of `sockets_held(pid)`, sampled every 50 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            with contextlib.suppress(OSError):
                self.peak = max(self.peak, sockets_held(self.pid))


def _request(port: int) -> bytes:
    body = b'{"tool":"jarvis.policy.check","args":{"argv":["echo","hi"]}}'
    return (
        f"POST /tools/jarvis.policy.check HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


async def _call(port: int, within: float = ANSWER_S) -> tuple[int | None, float]:
    """One authorized call on its own connection: its status (None: no answer) and seconds."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(within):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(_request(port))
                await writer.drain()
                status_line = await reader.readline()
                await reader.read()
            finally:
                writer.close()
    except (OSError, TimeoutError) as exc:
        _FAILURES[type(exc).__name__] += 1
        return None, time.monotonic() - started
    parts = status_line.split()
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    return status, time.monotonic() - started


def _p99(seconds: list[float]) -> float | None:
    if not seconds:
        return None
    ordered = sorted(seconds)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


async def _sequential(port: int, count: int, pause: float = 0.0) -> list[tuple[int | None, float]]:
    answers = []
    for _ in range(count):
        answers.append(await _call(port))
        await asyncio.sleep(pause)
    return answers


def _summary(
    name: str, pid: int, sampler: _Sampler, answers: list[tuple[int | None, float]], note: str
) -> Callable[[int], JarvisPhase]:
    ok = [seconds for status, seconds in answers if status == 200]

    def done(before: int) -> JarvisPhase:
        return JarvisPhase(
            name=name,
            held_peak=sampler.peak,
            answered=len(ok),
            asked=len(answers),
            p99_ms=_p99(ok),
            rss_before_kib=before,
            rss_after_kib=rss_kib(pid),
            note=note,
        )

    return done


def half_open(scratch: Path, count: int, calls: int = 50) -> JarvisPhase:
    """`count` connections that never finish their heads, jarvis at 256 descriptors."""
    with jarvis_child(scratch) as (pid, port), _more_descriptors(count):
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (256, 256))
        before = rss_kib(pid)
        with _Sampler(pid) as sampler:
            flood = _half_open_sockets(port, count)
            try:
                answers = asyncio.run(_sequential(port, calls))
            finally:
                for sock in flood:
                    sock.close()
        time.sleep(0.5)
        note = f"{count:,} half-open connections, descriptor limit 256"
        return _summary("half-open", pid, sampler, answers, note)(before)


def concurrent(scratch: Path, count: int) -> JarvisPhase:
    """`count` authorized calls at once, each on its own connection."""
    with jarvis_child(scratch) as (pid, port), _more_descriptors(count):
        before = rss_kib(pid)

        async def burst() -> list[tuple[int | None, float]]:
            calls = (_call(port, BURST_S) for _ in range(count))
            return list(await asyncio.gather(*calls))

        with _Sampler(pid) as sampler:
            answers = asyncio.run(burst())
        time.sleep(0.5)
        refused = sum(1 for status, _ in answers if status == 503)
        lost = sum(1 for status, _ in answers if status not in (200, 503))
        how = ", ".join(f"{n:,} {kind}" for kind, n in sorted(_FAILURES.items()))
        note = (
            f"{count:,} at once: {refused:,} refused 503 at accept, {lost:,} without an answer"
            + (f" ({how})" if how else "")
        )
        _FAILURES.clear()
        return _summary("concurrent", pid, sampler, answers, note)(before)


def slow_body(scratch: Path, count: int, seconds: float = 12.0) -> JarvisPhase:
    """`count` authorized heads whose bodies trickle, while authorized calls are made."""
    with jarvis_child(scratch) as (pid, port), _more_descriptors(count):
        before = rss_kib(pid)
        head = (
            f"POST /tools/jarvis.policy.check HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n"
        ).encode()

        async def trickle() -> None:
            streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(count)]
            for _, writer in streams:
                writer.write(head)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                for _, writer in streams:
                    with contextlib.suppress(OSError):
                        writer.write(b" ")
                await asyncio.sleep(0.5)
            for _, writer in streams:
                writer.close()

        async def both() -> list[tuple[int | None, float]]:
            slow = asyncio.create_task(trickle())
            await asyncio.sleep(0.5)
            answers = await _sequential(port, int(seconds / 0.25) - 4, pause=0.2)
            await slow
            return answers

        with _Sampler(pid) as sampler:
            answers = asyncio.run(both())
        time.sleep(0.5)
        note = f"{count:,} bodies at a byte per 0.5 s for {seconds:g} s (jarvis: 408 at 10 s)"
        return _summary("slow body", pid, sampler, answers, note)(before)


@contextlib.contextmanager
def _more_descriptors(count: int) -> Iterator[None]:
    """This process may hold `count` more sockets: the soft limit raised as far as allowed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = count + 1024
    if hard != resource.RLIM_INFINITY and hard < wanted:
        raise RuntimeError(f"the descriptor hard limit {hard} is below {wanted}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _half_open_sockets(port: int, count: int, within: float = 5.0) -> list[socket.socket]:
    head = f"POST /tools/jarvis.policy.check HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    sockets, selector = [], selectors.DefaultSelector()
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        selector.register(sock, selectors.EVENT_WRITE)
        sockets.append(sock)
    pending, deadline = count, time.monotonic() + within
    while pending and time.monotonic() < deadline:
        for key, _ in selector.select(0.1):
            connected = key.fileobj
            assert isinstance(connected, socket.socket)
            selector.unregister(connected)
            pending -= 1
            with contextlib.suppress(OSError):
                connected.send(head)
    selector.close()
    return sockets


def run_phases(half: int, burst: int, slow: int) -> list[JarvisPhase]:
    """The three phases, each against its own jarvis child."""
    with tempfile.TemporaryDirectory(prefix="jigcmd-soak-jarvis-") as scratch:
        root = Path(scratch)
        return [
            half_open(root / "half-open", half),
            concurrent(root / "concurrent", burst),
            slow_body(root / "slow-body", slow),
        ]
