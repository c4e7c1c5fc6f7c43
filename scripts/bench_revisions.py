"""Two revisions of jigcmd side by side: the same calls, alternating, in one run.

For judging a change on a noisy machine: a `jigcmd serve` from each revision (a git worktree
made for it, or the working tree for `.`) answers `bun test` calls on the bundled example in
turn (the order flips every round), with `--idle-ms` of idle before each call; prints each
one's median and quartiles, the ratio of the medians, and the median of the per-round
differences with a 95% bootstrap interval (the two calls of a round are neighbours in time,
so the machine's drift cancels out of their difference; an interval that spans 0 means the
run cannot tell the revisions apart). Both servers live through the whole run, so each also
pays for the other's background work (preparing its next envelopes).

With `--block N` each round is N calls in a row to one server, then N to the other (after
`BLOCK_SETTLE_S` of idle, so that neither pays for the other's background work), and the
per-round difference is between the two blocks' medians: with `--idle-ms 0` each server is
called truly back to back, as one caller calling again as soon as it has its answer.

Run as root: python scripts/bench_revisions.py BASE [CANDIDATE] [--calls 50] [--idle-ms 100]
[--block 1] [--mcp] (CANDIDATE defaults to `.`, the working tree; `--mcp` times MCP
`tools/call`s).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout: the sibling benchmark must be importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench_envelope import Serve, admit  # noqa: E402 - needs the path set up above
from scripts.bench_floor import cpu_rounds  # noqa: E402 - likewise

WARMUP = 3
# Idle after each CPU block, so that deferred kernel work counts for the revision that caused it.
CPU_SETTLE_S = 0.3
# Idle before each block of `--block` calls.
BLOCK_SETTLE_S = 0.2
BOOTSTRAP_SAMPLES = 2000


def paired_interval(differences: list[float]) -> tuple[float, float, float]:
    """The median difference and a 95% bootstrap interval for it (fixed seed: rerunnable)."""
    rng = random.Random(0)
    medians = sorted(
        statistics.median(rng.choices(differences, k=len(differences)))
        for _ in range(BOOTSTRAP_SAMPLES)
    )
    low = medians[int(0.025 * BOOTSTRAP_SAMPLES)]
    high = medians[int(0.975 * BOOTSTRAP_SAMPLES) - 1]
    return statistics.median(differences), low, high


class Revision:
    """One revision's tree and its persistent `jigcmd serve`."""

    def __init__(
        self, revision: str, work: Path, *, mcp: bool = False, extra_args: Sequence[str] = ()
    ) -> None:
        self.name = revision
        if revision == ".":
            self.tree = ROOT
        else:
            self.tree = work / f"tree-{len(list(work.glob('tree-*')))}"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(self.tree), revision],
                check=True,
                capture_output=True,
            )
        # Bytecode first, as an installed package has it: a server or zygote that compiles
        # its modules as it imports them keeps a larger heap (~1.4 MiB RSS in the zygote).
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(self.tree / "jigcmd")],
            check=True,
            capture_output=True,
        )
        state = Path(tempfile.mkdtemp(prefix="state-", dir=work))
        binding = self.tree / "jigcmd" / "example" / "binding.toml"
        lock = state / "jigcmd.lock"
        # `python -m jigcmd` from the tree's root imports that tree's package first.
        admit(lock, binding=binding, cwd=self.tree)
        self.lock, self.state, self.binding = lock, state / "state", binding
        self.server = self.serve(mcp=mcp, extra_args=extra_args)
        # Each round's latency (the median of its block), and every call's.
        self.latencies: list[float] = []
        self.calls: list[float] = []

    def serve(self, *, mcp: bool = False, extra_args: Sequence[str] = ()) -> Serve:
        """Another `jigcmd serve` of this revision, on its state directory (a session more)."""
        return Serve(
            self.lock,
            self.state,
            binding=self.binding,
            cwd=self.tree,
            mcp=mcp,
            extra_args=extra_args,
        )


def remove_tree(tree: Path) -> None:
    """Remove a git worktree that `Revision` made."""
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
        check=False,
        capture_output=True,
    )


def remove_work(work: Path) -> None:
    """Remove every worktree `Revision` made under `work`, then `work` itself."""
    for tree in work.glob("tree-*"):
        remove_tree(tree)
    shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="a git revision")
    parser.add_argument("candidate", nargs="?", default=".", help="a revision, or . (default)")
    parser.add_argument("--calls", type=int, default=50, help="measured calls per revision")
    parser.add_argument("--idle-ms", type=float, default=100.0, help="idle before each call")
    parser.add_argument(
        "--cpu-rounds", type=int, default=0, help="also machine CPU per call, in this many rounds"
    )
    parser.add_argument("--cpu-calls", type=int, default=30, help="calls per CPU round")
    parser.add_argument("--mcp", action="store_true", help="MCP tools/call instead of Run/1")
    parser.add_argument(
        "--block", type=int, default=1, help="calls in a row to one server per round"
    )
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jigcmd-bench-revisions-"))
    revisions: list[Revision] = []
    try:
        for name in (options.base, options.candidate):
            revisions.append(Revision(name, work, mcp=options.mcp))
        block = max(1, options.block)
        for revision in revisions:
            for _ in range(WARMUP):
                revision.server.run()
        for number in range(max(1, options.calls // block)):
            order = revisions if number % 2 == 0 else revisions[::-1]
            for revision in order:
                if block > 1:
                    time.sleep(BLOCK_SETTLE_S)
                times = []
                for _ in range(block):
                    time.sleep(options.idle_ms / 1000)
                    times.append(revision.server.run() * 1000)
                revision.latencies.append(statistics.median(times))
                revision.calls.extend(times)
        cpu: dict[str, float] = {}
        if options.cpu_rounds:
            servers = [revision.server for revision in revisions]
            for revision in revisions:
                revision.server.name = revision.name
            cpu = cpu_rounds(servers, options.cpu_rounds, options.cpu_calls, CPU_SETTLE_S)  # type: ignore[arg-type]
    finally:
        for revision in revisions:
            revision.server.close()
        remove_work(work)
    shape = "alternating" if options.block <= 1 else f"in blocks of {options.block}"
    print(f"{options.calls} calls each, {shape}, {options.idle_ms:g} ms idle before each")
    print(f"{'revision':24} {'median ms':>9} {'p25':>7} {'p75':>7}")
    medians = []
    for revision in revisions:
        ordered = sorted(revision.calls)
        median = statistics.median(ordered)
        medians.append(median)
        print(
            f"{revision.name:24} {median:9.2f} {ordered[len(ordered) // 4]:7.2f}"
            f" {ordered[3 * len(ordered) // 4]:7.2f}"
        )
    print(f"candidate / base: {medians[1] / medians[0]:.2f}x ({medians[1] - medians[0]:+.2f} ms)")
    base, candidate = revisions
    median, low, high = paired_interval(
        [c - b for b, c in zip(base.latencies, candidate.latencies, strict=True)]
    )
    print(f"per-round difference: median {median:+.2f} ms, 95% interval [{low:+.2f}, {high:+.2f}]")
    if cpu:
        print(
            f"machine CPU per call ({options.cpu_rounds} rounds of {options.cpu_calls}, each"
            " ending idle, background subtracted): "
            + ", ".join(f"{name} {value:.2f} ms" for name, value in cpu.items())
            + f"; candidate / base {cpu[candidate.name] / cpu[base.name]:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
