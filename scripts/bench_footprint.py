"""The idle footprint of a `jigcmd serve` tree: processes, RSS and PSS, revisions side by side.

Each revision's server (a git worktree made for it, or the working tree for `.`) answers a
few `bun test` calls on the bundled example, then idles with its prepared envelopes; the
whole tree under it (the server, the zygote, each prepared envelope's processes) is then
read from /proc: the number of processes, how many of them are Python, and the sum of
`Rss` and `Pss` from each one's `smaps_rollup`. PSS divides every shared page among the
processes that map it, so the tree's PSS is what it costs the machine.

Run as root: python scripts/bench_footprint.py [BASE] [CANDIDATE ...] [--idle-s 3]
(no revision: the working tree alone).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout: the sibling benchmark must be importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench_revisions import Revision  # noqa: E402 - needs the path set up above

CALLS = 3


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        parent = int(data[data.rindex(b")") + 2 :].split()[1])
        tree.setdefault(parent, []).append(int(name))
    return tree


def descendants(root: int) -> list[int]:
    """`root` and every process below it."""
    tree = _children()
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(tree.get(pid, []))
    return found


def _rollup(pid: int) -> dict[str, int]:
    fields: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
            for line in handle:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if len(parts) == 2 and parts[1] == "kB":
                    fields[key] = int(parts[0])
    except OSError:
        pass
    return fields


def _is_python(pid: int) -> bool:
    try:
        return "python" in os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return False


def footprint(root: int) -> tuple[int, int, float, float]:
    """(processes, Python processes, RSS MiB, PSS MiB) of the tree under `root`."""
    pids = descendants(root)
    rss = pss = 0
    for pid in pids:
        fields = _rollup(pid)
        rss += fields.get("Rss", 0)
        pss += fields.get("Pss", 0)
    return len(pids), sum(map(_is_python, pids)), rss / 1024, pss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revisions", nargs="*", default=["."], help="git revisions, or .")
    parser.add_argument("--idle-s", type=float, default=3.0, help="idle before reading")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jigcmd-footprint-"))
    revisions: list[Revision] = []
    try:
        revisions = [Revision(name, work) for name in args.revisions]
        for revision in revisions:
            for _ in range(CALLS):
                revision.server.run()
        time.sleep(args.idle_s)
        print(f"after {CALLS} calls and {args.idle_s:.0f} s idle:")
        print(f"{'revision':<14}{'processes':>10}{'python':>8}{'RSS MiB':>10}{'PSS MiB':>10}")
        for revision in revisions:
            count, python, rss, pss = footprint(revision.server.process.pid)
            print(f"{revision.name:<14}{count:>10}{python:>8}{rss:>10.1f}{pss:>10.1f}")
    finally:
        for revision in revisions:
            revision.server.close()
            if revision.tree != ROOT:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(revision.tree)],
                    check=False,
                    capture_output=True,
                )
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
