"""A host-side witness of everything a jigcmd server starts, independent of jigcmd's own records.

A background thread scans /proc every few milliseconds and traces every process descending
from a watched server (a traced process stays traced after its parent dies, and so do its
children): its identity (pid + start time, so a recycled pid is never confused), its command
line at each scan (the candidate's changes at exec), the jigcmd cgroup job it sits in, and
its network and mount namespaces, each held open from its first sighting until `stop` (nsfs
hands a freed namespace's inode number to the next namespace made, often the next envelope's,
so a namespace let go of could not be told from a new one by its number). From that record
a test can count how many distinct candidate processes carried a unique token (how many
times a command really ran) and check that nothing traced is left: no process, no cgroup
job, no namespace held by any process.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

__all__ = [
    "Proc",
    "Watch",
    "alive",
    "handles",
    "hold_namespace",
    "namespace_holders",
    "parent",
    "wait_for",
]

_SCAN_INTERVAL_S = 0.01


@dataclass(frozen=True)
class Proc:
    """A process identity that survives pid reuse."""

    pid: int
    start: int


@dataclass
class _Seen:
    root: int
    parent: int
    cmdlines: set[str] = field(default_factory=set)
    jobs: set[str] = field(default_factory=set)


def _stat(pid: int) -> tuple[Proc, int, str] | None:
    """(identity, parent pid, state letter) of `pid`, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    return Proc(pid, int(fields[19])), int(fields[1]), fields[0].decode()


def parent(proc: Proc) -> Proc | None:
    """The process that is `proc`'s parent now, or None when `proc` is gone."""
    found = _stat(proc.pid)
    if found is None or found[0] != proc:
        return None
    above = _stat(found[1])
    return None if above is None else above[0]


def alive(proc: Proc) -> bool:
    """Whether `proc` still runs (a zombie is dead; a recycled pid is another process)."""
    found = _stat(proc.pid)
    return found is not None and found[0] == proc and found[2] not in ("Z", "X")


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` until true; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return None


def hold_namespace(pid: int, kind: str, link: str) -> int | None:
    """A descriptor of `pid`'s `kind` namespace if it still is `link`, else None (pid gone)."""
    try:
        fd = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    if f"{kind}:[{os.fstat(fd).st_ino}]" == link:
        return fd
    # The pid exited between the readlink and the open, and its number went to another.
    os.close(fd)
    return None


def _host_namespaces() -> set[str]:
    return {os.readlink(f"/proc/self/ns/{kind}") for kind in ("net", "mnt")}


class Watch:
    """Traces the process trees of the servers given to `add_root`, until `stop`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roots: set[int] = set()
        self._seen: dict[Proc, _Seen] = {}
        # Every envelope namespace seen, held open by descriptor until `stop`.
        self._held: dict[str, int] = {}
        self._stop = threading.Event()
        self._host = _host_namespaces()
        self._thread = threading.Thread(target=self._loop, name="lifetime-watch", daemon=True)
        self._scans = 0
        self._thread.start()

    def add_root(self, pid: int) -> None:
        """Trace the server `pid` and everything it starts from now on."""
        with self._lock:
            self._roots.add(pid)
        self.sync()

    def stop(self) -> None:
        """End the scanning thread."""
        self._stop.set()
        self._thread.join()
        for fd in self._held.values():
            os.close(fd)
        self._held.clear()

    def sync(self) -> None:
        """Return after one complete scan that started after this call."""
        with self._lock:
            target = self._scans + 2
        wait_for(lambda: self._scans >= target or self._stop.is_set(), 10, "a /proc scan")

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._scan()
            self._stop.wait(_SCAN_INTERVAL_S)

    def _scan(self) -> None:
        table: dict[int, tuple[Proc, int]] = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (found := _stat(int(name))) is not None and found[2] != "Z":
                table[int(name)] = (found[0], found[1])
        with self._lock:
            traced_pids = {p.pid: s.root for p, s in self._seen.items() if alive(p)}
            roots = {pid: pid for pid in self._roots} | traced_pids
            for pid, (proc, parent) in table.items():
                root = self._root_of(pid, table, roots)
                if root is None:
                    continue
                seen = self._seen.setdefault(proc, _Seen(root=root, parent=parent))
                self._observe(pid, seen)
            self._scans += 1

    @staticmethod
    def _root_of(pid: int, table: dict[int, tuple[Proc, int]], roots: dict[int, int]) -> int | None:
        hops = 0
        current = pid
        while hops < 64:
            if current in roots:
                return roots[current]
            entry = table.get(current)
            if entry is None or entry[1] <= 1:
                return None
            current = entry[1]
            hops += 1
        return None

    def _observe(self, pid: int, seen: _Seen) -> None:
        cmdline = _read(f"/proc/{pid}/cmdline")
        if cmdline:
            seen.cmdlines.add(cmdline)
        cgroups = _read(f"/proc/{pid}/cgroup") or ""
        # A process still exiting after its cgroup was removed shows "<path> (deleted)".
        jobs = {
            part
            for line in cgroups.splitlines()
            for part in line.partition(":")[2]
            .partition(":")[2]
            .removesuffix(" (deleted)")
            .split("/")
            if part.startswith("jigcmd-")
        }
        seen.jobs |= jobs
        if jobs:
            for kind in ("net", "mnt"):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{pid}/ns/{kind}")
                    fresh = link not in self._host and link not in self._held
                    if fresh and (fd := hold_namespace(pid, kind, link)) is not None:
                        self._held[link] = fd

    # -- what was seen ------------------------------------------------------------------

    def _select(self, root: int | None) -> list[tuple[Proc, _Seen]]:
        with self._lock:
            return [(p, s) for p, s in self._seen.items() if root is None or s.root == root]

    def runs(self, token: str) -> int:
        """How many distinct processes ever had `token` as a whole argument (candidate execs)."""
        self.sync()
        return sum(
            1
            for _proc, seen in self._select(None)
            if any(token in cmdline.split("\0") for cmdline in seen.cmdlines)
        )

    def running(self, token: str) -> list[Proc]:
        """The live processes whose current command line has `token` as a whole argument."""
        self.sync()
        found = []
        for proc, seen in self._select(None):
            cmdline = _read(f"/proc/{proc.pid}/cmdline") or ""
            if alive(proc) and token in cmdline.split("\0"):
                found.append(proc)
                # What is seen here counts too: a candidate that exec'd after the last scan
                # and ends (say, on the test's SIGTERM) before the next one is still a run.
                with self._lock:
                    seen.cmdlines.add(cmdline)
        return found

    def children_named(self, root: int, word: str) -> list[Proc]:
        """Live direct children of `root` whose command line mentions `word`."""
        return [
            proc
            for proc, seen in self._select(root)
            if seen.parent == root and alive(proc) and any(word in c for c in seen.cmdlines)
        ]

    def children(self, parent: Proc) -> list[Proc]:
        """Live traced direct children of `parent`."""
        self.sync()
        return [
            proc for proc, seen in self._select(None) if seen.parent == parent.pid and alive(proc)
        ]

    def jobs(self, root: int | None = None) -> set[str]:
        """Every jigcmd cgroup job a traced process (of `root`, or any) was seen in."""
        return {job for _proc, seen in self._select(root) for job in seen.jobs}

    def live_jobs(self, root: int) -> set[str]:
        """The jobs of `root`'s live traced processes (its envelopes, prepared or running)."""
        self.sync()
        return {job for proc, seen in self._select(root) if alive(proc) for job in seen.jobs}

    def left_alive(self) -> list[Proc]:
        """Traced processes still running."""
        return [proc for proc, _seen in self._select(None) if alive(proc)]

    def namespaces(self) -> set[str]:
        """Every envelope network and mount namespace seen (each still held by the watch)."""
        with self._lock:
            return set(self._held)


def namespace_holders(namespaces: Collection[str]) -> dict[str, list[int]]:
    """Live processes (other than this one) still in one of `namespaces`."""
    holders: dict[str, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid() or _stat(int(name)) is None:
            continue
        for kind in ("net", "mnt"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{name}/ns/{kind}")
                if link in namespaces:
                    holders.setdefault(link, []).append(int(name))
    return holders


def handles(proc: Proc, signum: int) -> bool:
    """Whether `proc` has installed a handler for `signum` (its SigCgt mask)."""
    status = _read(f"/proc/{proc.pid}/status") or ""
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False
