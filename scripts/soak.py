"""Soak: N sequential runs through one `jigcmd serve`; every resource it holds must stay flat.

    python scripts/soak.py                      # 500 runs of the bundled example's `cli`
    python scripts/soak.py --runs 60 --every 10 --binding B.toml --state-dir D

Every `--every` runs it samples, from the host: the server's open descriptors and RSS, its
live processes (zygote, prepared envelope), the jigcmd cgroup jobs of its tree plus any job
of it seen before that still exists (a leaked, emptied cgroup), the network namespaces held
by processes in those jobs, the host's mount count (/proc/self/mountinfo lines), jigcmd
scratch mounts visible on the host, and open ownership rows. It prints a table and exits 1
when anything grew beyond a small tolerance between the first sample (after a warm-up) and
the last, 2 when a run failed or the server broke, 0 otherwise. Needs root, cgroups and Bun.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from jigcmd.envelope.cgroups import CgroupBackend, detect  # noqa: E402 - after the path setup

EXAMPLE = REPO / "jigcmd" / "example"
SOURCE = (
    'console.log("soak " + process.argv[2]);\n'
    'if (process.argv[3] !== "0") console.error("x".repeat(Number(process.argv[3]) * 1024));\n'
)
ANSWER_SECONDS = 60.0
WARM_UP_RUNS = 5
# Allowed growth from the first sample to the last, per column.
TOLERANCE = {
    "fds": 2,
    "rss_kib": 8 * 1024,
    "procs": 2,
    "jobs": 1,
    "netns": 1,
    "mounts": 2,
    "scratch": 0,
    "open_rows": 0,
}


@dataclass(frozen=True)
class Sample:
    """One look at everything the server holds, after `runs` completed runs."""

    runs: int
    fds: int
    rss_kib: int
    procs: int
    jobs: int
    netns: int
    mounts: int
    scratch: int
    open_rows: int


class Server:
    """A `jigcmd serve` child spoken to in FLOW Run/1, one request at a time."""

    def __init__(self, binding: Path, state_dir: Path, stderr: Path) -> None:
        with stderr.open("wb") as err:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "jigcmd",
                    "serve",
                    "--binding",
                    str(binding),
                    "--state-dir",
                    str(state_dir),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                cwd=REPO,
            )
        assert self.process.stdout is not None
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.process.stdout.fileno(), selectors.EVENT_READ)
        os.set_blocking(self.process.stdout.fileno(), False)
        self.buffer = b""

    def request(self, message: dict[str, object]) -> dict[str, object]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        deadline = time.monotonic() + ANSWER_SECONDS
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.selector.select(remaining):
                raise RuntimeError(f"no answer to {message.get('id')} in {ANSWER_SECONDS} s")
            chunk = os.read(self.process.stdout.fileno(), 1 << 20)
            if not chunk:
                raise RuntimeError(f"the server exited with status {self.process.wait()}")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        answer: dict[str, object] = json.loads(line)
        if answer.get("id") != message.get("id"):
            raise RuntimeError(f"answer for another id: {line[:200]!r}")
        return answer

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            return self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


# How long a sample waits for the server's holdings to stop changing, and how often it looks.
SETTLE_LIMIT_S = 5.0
SETTLE_STEP_S = 0.15


class Observer:
    """Samples what one server holds; remembers every job of its tree ever seen."""

    def __init__(self, server_pid: int, state_dir: Path, backend: CgroupBackend) -> None:
        self.pid = server_pid
        self.state_dir = state_dir
        self.backend = backend
        self.seen_jobs: set[str] = set()

    def _tree(self) -> list[int]:
        parents: dict[int, int] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    data = Path(f"/proc/{name}/stat").read_bytes()
                    parents[int(name)] = int(data[data.rindex(b")") + 2 :].split()[1])
        tree, frontier = [], [self.pid]
        while frontier:
            pid = frontier.pop()
            children = [child for child, parent in parents.items() if parent == pid]
            tree += children
            frontier += children
        return tree

    def _holdings(self) -> tuple[list[int], set[str], set[str]]:
        """The tree's processes, the jobs they are in and the network namespaces of those."""
        tree = self._tree()
        live_jobs: set[str] = set()
        netns: set[str] = set()
        for pid in tree:
            with contextlib.suppress(OSError):
                text = Path(f"/proc/{pid}/cgroup").read_text()
                jobs = {
                    part
                    for line in text.splitlines()
                    for part in line.split(":", 2)[2].split("/")
                    if part.startswith("jigcmd-")
                }
                live_jobs |= jobs
                if jobs:
                    netns.add(os.readlink(f"/proc/{pid}/ns/net"))
        return tree, live_jobs, netns

    def _settled(self) -> tuple[list[int], set[str], set[str]]:
        """The holdings once they stop changing: right after a run, the used envelope is still
        going away and the pool refilling. A leak persists, so it still shows."""
        give_up = time.monotonic() + SETTLE_LIMIT_S
        seen = self._holdings()
        while time.monotonic() < give_up:
            time.sleep(SETTLE_STEP_S)
            again = self._holdings()
            if (len(again[0]), again[1], again[2]) == (len(seen[0]), seen[1], seen[2]):
                return again
            seen = again
        return seen

    def sample(self, runs: int) -> Sample:
        tree, live_jobs, netns = self._settled()
        self.seen_jobs |= live_jobs
        existing = set(self.backend.list_jobs())
        mountinfo = Path("/proc/self/mountinfo").read_text().splitlines()
        status = Path(f"/proc/{self.pid}/status").read_text()
        rss = next(
            int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")
        )
        return Sample(
            runs=runs,
            fds=len(os.listdir(f"/proc/{self.pid}/fd")),
            rss_kib=rss,
            procs=len(tree),
            jobs=len(live_jobs | (self.seen_jobs & existing)),
            netns=len(netns),
            mounts=len(mountinfo),
            scratch=sum(1 for line in mountinfo if "jigcmd-scratch" in line),
            open_rows=self._open_rows(),
        )

    def _open_rows(self) -> int:
        # The server closes a row in a worker thread right after the answer (not on its
        # path), so the last run's row may still be open for a moment: count again until
        # none is left or a second has passed. A row that stays open still shows.
        path = self.state_dir / "journal.sqlite3"
        give_up = time.monotonic() + 1.0
        while True:
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
                (count,) = conn.execute(
                    "SELECT count(*) FROM operations WHERE state IN ('dispatching', 'running')"
                ).fetchone()
            if not count or time.monotonic() >= give_up:
                return int(count)
            time.sleep(0.01)


def run_once(server: Server, index: int, token: str, output_kib: int) -> None:
    request_id = f"soak-{index}"
    answer = server.request(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "capability/call",
            "params": {
                "operationId": f"{token}-{index}",
                "slot": "command",
                "method": "run",
                "input": {
                    "command": "cli",
                    "files": {"src/cli.ts": SOURCE},
                    "args": [str(index), str(output_kib)],
                },
            },
        }
    )
    result = answer.get("result")
    value = result.get("value") if isinstance(result, dict) else None
    if not isinstance(value, dict) or value.get("exitCode") != 0:
        raise RuntimeError(f"run {index} failed: {json.dumps(answer)[:500]}")
    if value.get("stdout") != {"text": f"soak {index}\n", "truncated": False}:
        raise RuntimeError(f"run {index} printed {value.get('stdout')}")


def growth(first: Sample, last: Sample) -> list[str]:
    """The columns that grew beyond their tolerance."""
    grown = []
    for column, allowed in TOLERANCE.items():
        delta = getattr(last, column) - getattr(first, column)
        if delta > allowed:
            grown.append(f"{column} grew by {delta} (tolerance {allowed})")
    return grown


def print_table(samples: list[Sample]) -> None:
    columns = list(asdict(samples[0]))
    print(" ".join(f"{c:>9}" for c in columns))
    for sample in samples:
        print(" ".join(f"{v:>9}" for v in asdict(sample).values()))


def admitted_copy(scratch: Path) -> Path:
    root = scratch / "example"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("jigcmd.lock", "__pycache__"))
    binding = root / "binding.toml"
    subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--binding", str(binding)],
        check=True,
        capture_output=True,
        cwd=REPO,
    )
    return binding


def soak(
    runs: int, every: int, output_kib: int, binding: Path | None, state_dir: Path | None
) -> int:
    backend = detect()
    with tempfile.TemporaryDirectory(prefix="jigcmd-soak-") as scratch_dir:
        scratch = Path(scratch_dir)
        binding = binding or admitted_copy(scratch)
        state_dir = state_dir or scratch / "state"
        server = Server(binding, state_dir, scratch / "server.stderr")
        observer = Observer(server.process.pid, state_dir, backend)
        token = uuid.uuid4().hex[:12]
        samples: list[Sample] = []
        started = time.monotonic()
        try:
            for index in range(1, runs + 1):
                run_once(server, index, token, output_kib)
                if index == min(WARM_UP_RUNS, runs) or (
                    index > WARM_UP_RUNS and index % every == 0
                ):
                    samples.append(observer.sample(index))
            if samples[-1].runs != runs:
                samples.append(observer.sample(runs))
        except (RuntimeError, OSError) as exc:
            print(f"soak: {exc}")
            print((scratch / "server.stderr").read_text("utf-8", "replace")[-4000:])
            server.process.kill()
            return 2
        elapsed = time.monotonic() - started
        status = server.close()
        print_table(samples)
        print(f"{runs} runs in {elapsed:.1f} s ({elapsed / runs * 1000:.0f} ms per run)")
        grown = growth(samples[0], samples[-1])
        if status != 0:
            grown.append(f"the server exited with status {status}")
        # The prepared envelope is torn down by its own supervisor after the server exits.
        give_up = time.monotonic() + 10
        while (leaked := observer.seen_jobs & set(backend.list_jobs())) and (
            time.monotonic() < give_up
        ):
            time.sleep(0.05)
        if leaked:
            grown.append(f"cgroup jobs left after the server exited: {sorted(leaked)}")
        for problem in grown:
            print(f"NOT FLAT: {problem}")
        if not grown:
            print("flat: nothing grew beyond its tolerance")
        return 1 if grown else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=500, help="sequential runs (default 500)")
    parser.add_argument("--every", type=int, default=50, help="sample every N runs (default 50)")
    parser.add_argument(
        "--output-kib", type=int, default=0, help="KiB each run writes to stderr (default 0)"
    )
    parser.add_argument("--binding", type=Path, help="an admitted Binding (default: the example)")
    parser.add_argument("--state-dir", type=Path, help="state directory (default: a temporary one)")
    args = parser.parse_args()
    if args.runs < 1 or args.every < 1:
        parser.error("--runs and --every must be at least 1")
    return soak(args.runs, args.every, args.output_kib, args.binding, args.state_dir)


if __name__ == "__main__":
    sys.exit(main())
