"""The idle footprint of a `jigcmd serve` tree: processes, RSS and PSS, each revision alone.

Each revision's server (a git worktree made for it, or the working tree for `.`) answers a
few `bun test` calls on the bundled example, then idles with its prepared envelopes; the
whole tree under it (the server, the zygote, each prepared envelope's processes) is then
read from /proc: the number of processes, how many of them are Python, and the sum of
`Rss` and `Pss` from each one's `smaps_rollup`. PSS divides every shared page among the
processes that map it, so the tree's PSS is what it costs the machine.

Each revision is measured **alone**: its server is started, called, left idle, read and
closed before the next revision's starts. Two revisions alive at once would share the
interpreter's and the venv's file pages (libpython, cryptography's `.so`, libsqlite3), and
PSS would halve them between the two trees, so each would read several MiB too low.
(Other programs on the machine mapping the same files still lower the file share a little;
the anonymous share is the tree's own.) Each tree's bytecode is compiled first
(`bench_revisions.Revision`): a process that compiles its modules as it imports them keeps
a larger heap. Each server also gets a cgroup base of its own, so
that its start-up recovery does not look at (and load cgroupspy for) the jobs of other
servers on the machine. `--repeat N` measures the revisions N times in turn; `--processes`
prints each process's PSS split into anonymous and file pages.

The shared objects' page cache is dropped before each tree starts (`--warm` keeps it): a
library the kernel still caches as it was written (a fresh `pip install`) is held in large
folios, and each fault maps much more of it (cryptography's `_rust.abi3.so`: 4.2 MiB of its
text resident in the server against ~1 MiB once read back from disk; the tree 49.1 against
43.5 MiB PSS, measured on 2026-12-06). Dropping it makes every run read them from disk.

`staged` is the zygote's staged runtime (`jigcmd/envelope/staging.py`): its copies of Bun and
the libraries Bun loads, on a tmpfs. It is memory the tree holds, but no process maps it while
idle, so PSS leaves it out. `--sessions N` measures N servers of each revision on one state
directory, as one deployment's sessions run: every column is the sum over their trees, and
`staged` counts each tmpfs once (zygotes sharing a state directory share one copy since
`runtimeshare.py`; before, each held its own).

The `alone` columns are the same PSS with each page divided only among the tree's own
processes (read from `/proc/PID/pagemap`): other programs mapping the same files (another
engineer's Python, the same libpython and hard-linked venv libraries) lower the kernel's
file share by several MiB on a shared machine, and `alone` does not move with them (it is
an upper bound: it charges the tree all of libc and libpython too).

Run as root: python scripts/bench_footprint.py [REVISION ...] [--idle-s 3] [--repeat 1]
[--sessions 1] [--processes] [--warm] (no revision: the working tree alone).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run from a checkout: the sibling benchmark must be importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.bench_revisions import Revision, remove_tree  # noqa: E402 - needs the path set up above

CALLS = 3
KB_PER_MIB = 1024
PAGE = os.sysconf("SC_PAGE_SIZE")
# /proc/PID/pagemap: bit 63 present, bit 61 a file page (or shared anonymous), bits 0-54 PFN.
_PRESENT = 1 << 63
_FILE_PAGE = 1 << 61
_PFN = (1 << 55) - 1


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
    """`root` and every process below it, parents before children."""
    tree = _children()
    found, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        found.append(pid)
        todo.extend(sorted(tree.get(pid, [])))
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


def _name(pid: int, root: int) -> str:
    if pid == root:
        return "server"
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return "?"


class Process:
    """One process of the tree, as its `smaps_rollup` read it (kB)."""

    def __init__(self, pid: int, root: int) -> None:
        fields = _rollup(pid)
        self.pid = pid
        self.name = _name(pid, root)
        self.python = _is_python(pid)
        self.rss = fields.get("Rss", 0)
        self.pss = fields.get("Pss", 0)
        self.anon = fields.get("Pss_Anon", 0)
        self.file = fields.get("Pss_File", 0)
        # PSS with the pages' sharing counted within the tree only (`alone`).
        self.alone_anon = 0
        self.alone_file = 0

    @property
    def alone(self) -> int:
        """PSS as if the tree ran alone on the machine (kB)."""
        return self.alone_anon + self.alone_file


def _frames(pid: int) -> list[tuple[int, bool]]:
    """Each present page of `pid`'s address space: its page frame and whether it is a file's."""
    found: list[tuple[int, bool]] = []
    try:
        with (
            open(f"/proc/{pid}/maps", encoding="utf-8") as maps,
            open(f"/proc/{pid}/pagemap", "rb") as pagemap,
        ):
            for line in maps:
                start, end = (int(bound, 16) for bound in line.split()[0].split("-"))
                if start >= 1 << 47:  # [vsyscall]: no page table entries to read
                    continue
                pagemap.seek(start // PAGE * 8)
                data = pagemap.read((end - start) // PAGE * 8)
                for (entry,) in struct.iter_unpack("Q", data):
                    if entry & _PRESENT:
                        found.append((entry & _PFN, bool(entry & _FILE_PAGE)))
    except OSError:
        pass
    return found


def alone(processes: list[Process]) -> None:
    """Set each process's PSS as if the tree ran alone (`alone_anon`, `alone_file`, kB).

    The kernel's PSS divides a file page among every process on the machine that maps it, so
    another engineer's Python (the same libpython, a venv hard-linked to the same
    `cryptography`) lowers the tree's file share: the same tree read 5.6 to 14.8 MiB of file
    PSS within minutes on the shared machine. Here each page is divided only among the
    tree's own mappings of it (read from `pagemap`, as root): what the tree costs on a
    machine where nothing else maps those files, an upper bound (libc and libpython are
    mapped by most processes of any machine). The anonymous share is the same either way.
    """
    frames = {process.pid: _frames(process.pid) for process in processes}
    mappings: dict[int, int] = {}
    for pages in frames.values():
        for frame, _file in pages:
            mappings[frame] = mappings.get(frame, 0) + 1
    for process in processes:
        anon = file = 0.0
        for frame, is_file in frames[process.pid]:
            share = PAGE / 1024 / mappings[frame]
            if is_file:
                file += share
            else:
                anon += share
        process.alone_anon, process.alone_file = round(anon), round(file)


def footprint(*roots: int) -> list[Process]:
    """Every process of the trees under `roots`, each server first (`alone` over them all)."""
    processes = [Process(pid, root) for root in roots for pid in descendants(root)]
    alone(processes)
    return processes


def staged_kib(processes: list[Process]) -> int:
    """The zygotes' staged runtimes (staging.py's tmpfs) in use, kB: memory, but not in PSS.

    The copies of Bun and its libraries are mapped only while a candidate runs, so an idle
    tree's PSS leaves them out. A tmpfs several zygotes share is counted once.
    """
    usage: dict[int, int] = {}
    for process in processes:
        if process.name != "jigcmd-zygote":
            continue
        with (
            contextlib.suppress(OSError),
            open(f"/proc/{process.pid}/mountinfo", encoding="utf-8") as mountinfo,
        ):
            for line in mountinfo:
                fields = line.split()
                tail = fields[fields.index("-") + 1 :]
                if tail[:2] == ["tmpfs", "jigcmd-runtime"] and fields[3] == "/":
                    path = f"/proc/{process.pid}/root{fields[4]}"
                    used = os.statvfs(path)
                    usage[os.stat(path).st_dev] = (used.f_blocks - used.f_bfree) * used.f_frsize
    return sum(usage.values()) // 1024


def drop_library_cache() -> int:
    """Drop the page cache of the interpreter's and the venv's shared objects; how many files."""
    os.sync()  # dirty pages stay cached: a fresh install's are written first
    count = 0
    for root in {Path(sys.prefix), Path(sys.base_prefix)}:
        for path in root.rglob("*.so*"):
            if path.is_symlink() or not path.is_file():
                continue
            descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                # Pages some process maps stay; the rest are read back as the tree faults.
                os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(descriptor)
            count += 1
    return count


def measure(
    name: str, work: Path, idle_s: float, sessions: int, *, warm: bool = False
) -> tuple[list[Process], int]:
    """Start `name`'s servers alone, call each, let them idle, read their trees, close them."""
    if not warm:
        drop_library_cache()
    base = f"jigcmd-footprint-{secrets.token_hex(4)}"
    revision = Revision(name, work, extra_args=("--cgroup-base", base))
    servers = [revision.server]
    try:
        servers += [revision.serve(extra_args=("--cgroup-base", base)) for _ in range(sessions - 1)]
        for server in servers:
            for _ in range(CALLS):
                server.run()
        time.sleep(idle_s)
        processes = footprint(*(server.process.pid for server in servers))
        return processes, staged_kib(processes)
    finally:
        for server in servers:
            server.close()
        for group in Path("/sys/fs/cgroup").glob(f"*/{base}"):
            with contextlib.suppress(OSError):
                group.rmdir()
        if revision.tree != ROOT:
            remove_tree(revision.tree)


def _mib(kb: int) -> str:
    return f"{kb / KB_PER_MIB:>9.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revisions", nargs="*", default=["."], help="git revisions, or .")
    parser.add_argument("--idle-s", type=float, default=3.0, help="idle before reading")
    parser.add_argument("--repeat", type=int, default=1, help="measure each revision N times")
    parser.add_argument("--sessions", type=int, default=1, help="servers on one state directory")
    parser.add_argument("--processes", action="store_true", help="print each process too")
    parser.add_argument(
        "--warm", action="store_true", help="keep the shared objects' page cache as it is"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="jigcmd-footprint-"))
    print(
        f"each revision alone (no other jigcmd tree of this run alive), {args.sessions}"
        f" session(s) on one state directory, after {CALLS} calls each and {args.idle_s:g} s idle"
        f"{'' if args.warm else ', shared objects read from disk'}:"
    )
    header = f"{'revision':<14}{'processes':>10}{'python':>8}"
    header += f"{'RSS MiB':>9}{'PSS MiB':>9}{'anon':>9}{'file':>9}"
    header += f"{'alone':>9}{'anon':>9}{'file':>9}{'staged':>9}"
    print(header)
    try:
        for _ in range(args.repeat):
            for name in args.revisions:
                processes, staged = measure(name, work, args.idle_s, args.sessions, warm=args.warm)
                print(
                    f"{name:<14}{len(processes):>10}{sum(p.python for p in processes):>8}"
                    f"{_mib(sum(p.rss for p in processes))}{_mib(sum(p.pss for p in processes))}"
                    f"{_mib(sum(p.anon for p in processes))}{_mib(sum(p.file for p in processes))}"
                    f"{_mib(sum(p.alone for p in processes))}"
                    f"{_mib(sum(p.alone_anon for p in processes))}"
                    f"{_mib(sum(p.alone_file for p in processes))}{_mib(staged)}"
                )
                if args.processes:
                    for process in processes:
                        print(
                            f"  {process.name:<22}{process.pid:>8}{_mib(process.rss)}"
                            f"{_mib(process.pss)}{_mib(process.anon)}{_mib(process.file)}"
                            f"{_mib(process.alone)}{_mib(process.alone_anon)}"
                            f"{_mib(process.alone_file)}"
                        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
