"""Shared machinery for the real envelope suites: a traced executor that proves nothing is left.

`TracedExecutor` wraps a running `NativeExecutor`. For every run it records what the
supervisor reported at start (job cgroups, network namespace, pid 1) and, once the run is
over, looks at the host for itself: the job's cgroups are gone, no process is left in the
envelope's network or pid namespace or in its cgroup, and the host mount table is unchanged.

`PROBE_TS` is a TypeScript module the candidates import: it reports each attempt as one JSON
line and makes raw system calls through `bun:ffi` (libc is bound in the envelope).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import msgspec

from jigcmd.cancel import CancelSignal
from jigcmd.command.runtime import BUN_TARGET, find_runtime
from jigcmd.envelope.api import (
    Admit,
    EnvelopeIdentity,
    Hooks,
    OnEnded,
    OnOutput,
    RunOutcome,
    Ticket,
)
from jigcmd.envelope.cgroups import CgroupBackend
from jigcmd.envelope.native import NativeExecutor
from jigcmd.evidence import Evidence
from jigcmd.plan import Bind, RunPlan
from jigcmd.policy.planner import candidate_plan

__all__ = [
    "DEADLINE_S",
    "PROBE_TS",
    "Attempt",
    "RunTrace",
    "TracedExecutor",
    "attempts",
    "file_sha256",
    "host_mounts",
    "probe_plan",
    "schema_valid",
]

# How long a candidate that never ends gets before its deadline. Long enough for Bun to start
# (so the run ends "deadline", not "deadline passed before the candidate started"); a slow,
# emulated machine can raise it.
DEADLINE_S = float(os.environ.get("JIGCMD_TEST_DEADLINE_S", "1.5"))

# Named netns mounts belong to other suites (ours are anonymous); they may come and go
# while a run is in flight.
_FOREIGN_MOUNTS = ("/run/netns",)

PROBE_TS = r"""
import { dlopen, FFIType, ptr, read } from "bun:ffi";

const ERRNO: Record<number, string> = {
  1: "EPERM", 2: "ENOENT", 3: "ESRCH", 9: "EBADF", 11: "EAGAIN", 12: "ENOMEM", 13: "EACCES",
  14: "EFAULT", 16: "EBUSY", 17: "EEXIST", 18: "EXDEV", 20: "ENOTDIR", 21: "EISDIR",
  22: "EINVAL", 24: "EMFILE", 26: "ETXTBSY", 27: "EFBIG", 28: "ENOSPC", 30: "EROFS",
  38: "ENOSYS", 93: "EPROTONOSUPPORT", 95: "EOPNOTSUPP", 97: "EAFNOSUPPORT", 101: "ENETUNREACH",
  111: "ECONNREFUSED", 113: "EHOSTUNREACH",
};

const libc = dlopen("libc.so.6", {
  syscall: {
    args: Array(7).fill(FFIType.i64),
    returns: FFIType.i64,
  },
  __errno_location: { args: [], returns: FFIType.ptr },
});

export type Arg = number | Buffer;

/** One raw system call: its return value, or -1 and the errno name. */
export function sys(nr: number, ...args: Arg[]): { ret: number; code: string | null } {
  const padded = [...args, 0, 0, 0, 0, 0, 0].slice(0, 6);
  const raw = padded.map((a) => (typeof a === "number" ? a : ptr(a)));
  const ret = Number(libc.symbols.syscall(nr, ...raw));
  if (ret !== -1) return { ret, code: null };
  const errno = read.i32(libc.symbols.__errno_location()!, 0);
  return { ret, code: ERRNO[errno] ?? `errno ${errno}` };
}

export function cstr(text: string): Buffer {
  return Buffer.from(text + "\0");
}

export function emit(name: string, ok: boolean, detail: string): void {
  console.log(JSON.stringify({ name, ok, detail: detail.slice(0, 300) }));
}

/** Report a raw system call; ok when it succeeded. */
export function attemptSys(name: string, nr: number, ...args: Arg[]): number {
  const { ret, code } = sys(nr, ...args);
  emit(name, ret !== -1, code ?? String(ret));
  return ret;
}

function codeOf(error: unknown): string {
  const e = error as { code?: string; message?: string };
  return e.code ?? String(e.message ?? error).split("\n")[0];
}

/** Report a JS operation; ok when it did not throw. */
export function attempt(name: string, fn: () => unknown): void {
  try {
    emit(name, true, String(fn()));
  } catch (error) {
    emit(name, false, codeOf(error));
  }
}

/** Connect a fresh stream socket to `address`; report the raw result. */
function connectRaw(name: string, family: number, address: Buffer): void {
  const fd = sys(41, family, 1 | 0o2000000, 0);
  if (fd.ret === -1) return emit(name, false, "socket " + fd.code);
  attemptSys(name, 42, fd.ret, address, address.length);
  sys(3, fd.ret);
}

export function connectInet(name: string, ip: string, port: number): void {
  const address = Buffer.alloc(16);
  address.writeUInt16LE(2, 0);
  address.writeUInt16BE(port, 2);
  Buffer.from(ip.split(".").map(Number)).copy(address, 4);
  connectRaw(name, 2, address);
}

export function connectInet6(name: string, ip: number[], port: number): void {
  const address = Buffer.alloc(28);
  address.writeUInt16LE(10, 0);
  address.writeUInt16BE(port, 2);
  Buffer.from(ip).copy(address, 8);
  connectRaw(name, 10, address);
}

/** A unix socket by path, or in the abstract namespace when `path` starts with "@". */
export function connectUnix(name: string, path: string): void {
  const bytes = Buffer.from(path.startsWith("@") ? "\0" + path.slice(1) : path + "\0");
  const address = Buffer.alloc(2 + bytes.length);
  address.writeUInt16LE(1, 0);
  bytes.copy(address, 2);
  // An abstract name's length is the address length: no terminating NUL there.
  connectRaw(name, 1, address);
}

export async function attemptAsync(name: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    emit(name, true, String(await fn()));
  } catch (error) {
    emit(name, false, codeOf(error));
  }
}
"""


@functools.cache
def _runtime_binds() -> tuple[Bind, ...]:
    return find_runtime().binds


def probe_plan(
    source: str,
    *,
    args: Sequence[str] = (),
    stdin: str = "",
    seconds: float = 10.0,
    files: Sequence[tuple[str, str]] = (),
) -> RunPlan:
    """The plan for `bun ./main.ts ARGS` with `source` as main.ts and `PROBE_TS` as probe.ts."""
    return candidate_plan(
        bun=BUN_TARGET,
        runtime_binds=_runtime_binds(),
        kind="run",
        paths=["main.ts"],
        args=list(args),
        files=(("main.ts", source), ("probe.ts", PROBE_TS), *files),
        stdin=stdin,
        deadline=time.monotonic() + seconds,
    )


class Attempt(msgspec.Struct, frozen=True):
    """One line a probe candidate printed: what it tried, whether it worked, and why not."""

    name: str
    ok: bool
    detail: str


def attempts(stdout: str) -> dict[str, Attempt]:
    """The attempts a probe candidate reported on stdout, by name."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith('{"name":'):
            item = msgspec.json.decode(line, type=Attempt)
            found[item.name] = item
    return found


def schema_valid(evidence: Evidence) -> Evidence:
    """Round-trip the evidence through its strict wire schema (ten fields, exact types)."""
    wire = msgspec.json.encode(evidence)
    assert set(json.loads(wire)) == {
        "candidateDigest",
        "command",
        "invocation",
        "stdinDigest",
        "stdout",
        "stderr",
        "exitCode",
        "signal",
        "stopReason",
        "cleanup",
    }
    return msgspec.json.decode(wire, type=Evidence)


def file_sha256(path: str) -> str:
    """The SHA-256 of a file, hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def host_mounts() -> frozenset[str]:
    """This process's mount table, minus the mounts other suites create concurrently."""
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
        return frozenset(
            line for line in handle if not any(f" {m}/" in line for m in _FOREIGN_MOUNTS)
        )


def _pids() -> Iterator[int]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def _ns_inode(pid: int, kind: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/{kind}").st_ino
    except OSError:
        return None


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            return handle.read().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _cgroup_lines(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""


@dataclass
class RunTrace:
    """What the supervisor said about one envelope at start, and what we found after it."""

    started: EnvelopeIdentity | None = None
    pid_ns: int | None = None
    leftovers: list[str] = field(default_factory=list)
    # Dead but unreaped processes of the envelope (see `test_pid_1_is_reaped_...`).
    zombies: list[int] = field(default_factory=list)
    # The envelope's namespaces, held open until the leftover check is done: a freed
    # namespace's inode number goes to the next one made (the lowest free), often the next
    # envelope's, whose pid 1 would then read as a process left in this one.
    held: list[int] = field(default_factory=list)

    def release(self) -> None:
        """Let go of the namespaces held for the check."""
        for fd in self.held:
            os.close(fd)
        self.held.clear()

    @property
    def job(self) -> str | None:
        """The job's cgroup directory name."""
        if self.started is None or not self.started.cgroup_paths:
            return None
        return os.path.basename(self.started.cgroup_paths[0])

    @property
    def net_ns(self) -> int | None:
        """The inode of the envelope's network namespace."""
        if self.started is None:
            return None
        return int(self.started.netns.removeprefix("net:[").removesuffix("]"))


class TracedExecutor:
    """An `Executor` that runs plans on a real `NativeExecutor` and proves each run left nothing."""

    def __init__(self, inner: NativeExecutor, backend: CgroupBackend) -> None:
        self.inner = inner
        self.backend = backend
        self.traces: list[RunTrace] = []
        self.last: RunOutcome | None = None
        # Job names known to be ours: every run's, plus any a test registers (prepared ones).
        self.jobs: set[str] = set()
        self._current: RunTrace | None = None
        self._started_hook: Callable[[EnvelopeIdentity], None] | None = None

    async def _on_started(self, started: EnvelopeIdentity) -> None:
        trace = self._current
        if trace is not None:
            trace.started = started
            if trace.job is not None:
                self.jobs.add(trace.job)
            # pid 1 is alive while its candidate runs; read its pid namespace now.
            trace.pid_ns = _ns_inode(started.init_pid, "pid")
            for kind in ("net", "pid"):
                with contextlib.suppress(OSError):
                    trace.held.append(os.open(f"/proc/{started.init_pid}/ns/{kind}", os.O_RDONLY))
        if self._started_hook is not None:
            self._started_hook(started)

    async def execute(
        self,
        plan: RunPlan,
        cancel: CancelSignal,
        ticket: Ticket | None = None,
        hooks: Hooks | None = None,
    ) -> RunOutcome:
        """Run `plan`; fail the test when anything of the envelope is left on the host."""
        hooks = hooks or Hooks()
        outcome = await self.run(
            plan,
            cancel,
            ticket=ticket,
            admit=hooks.admit,
            on_ended=hooks.on_ended,
            on_output=hooks.on_output,
        )
        if hooks.on_started is not None and self.traces[-1].started is not None:
            # The service records the serving envelope; replay the hook for it.
            work = hooks.on_started(self.traces[-1].started)
            if work is not None:
                await work
        return outcome

    async def run(
        self,
        plan: RunPlan,
        cancel: CancelSignal | None = None,
        on_started: Callable[[EnvelopeIdentity], None] | None = None,
        ticket: Ticket | None = None,
        admit: Admit | None = None,
        on_ended: OnEnded | None = None,
        on_output: OnOutput | None = None,
    ) -> RunOutcome:
        """Like `execute`, with an optional hook called when the candidate has started."""
        trace = RunTrace()
        self.traces.append(trace)
        self._current, self._started_hook = trace, on_started
        mounts = host_mounts()
        self.last = None
        try:
            self.last = await self.inner.execute(
                plan,
                cancel or CancelSignal(),
                ticket,
                Hooks(
                    admit=admit,
                    on_started=self._on_started,
                    on_ended=on_ended,
                    on_output=on_output,
                ),
            )
        finally:
            self._current, self._started_hook = None, None
            trace.leftovers = self.leftovers(trace)
            trace.release()
            added = host_mounts() - mounts
            trace.leftovers += [f"host mount added: {line.strip()}" for line in sorted(added)]
        assert trace.started is not None, "the supervisor never reported the start"
        assert not trace.leftovers, "\n".join(trace.leftovers)
        return self.last

    def leftovers(self, trace: RunTrace) -> list[str]:
        """Everything of `trace`'s envelope that still exists on the host."""
        problems: list[str] = []
        trace.zombies = []
        if trace.started is None:
            return problems
        job = trace.job
        for path in trace.started.cgroup_paths:
            if os.path.exists(path):
                problems.append(f"cgroup directory left: {path}")
        if job is not None and job in self.backend.list_jobs():
            problems.append(f"cgroup job still listed: {job}")
        for pid in _pids():
            if (
                trace.pid_ns is not None
                and _ns_inode(pid, "pid") == trace.pid_ns
                and _is_zombie(pid)
            ):
                trace.zombies.append(pid)
                continue
            if trace.net_ns is not None and _ns_inode(pid, "net") == trace.net_ns:
                problems.append(f"process {pid} left in the envelope's network namespace")
            if trace.pid_ns is not None and _ns_inode(pid, "pid") == trace.pid_ns:
                problems.append(f"process {pid} left in the envelope's pid namespace")
            if job is not None and f"/{job}\n" in _cgroup_lines(pid):
                problems.append(f"process {pid} left in the job cgroup {job}")
        return problems

    def jobs_left(self, timeout: float = 5.0) -> set[str]:
        """Our jobs that still exist (waits `timeout` for prepared ones to go).

        Only jobs known to be ours: the machine is shared, other suites' jobs come and go.
        """
        deadline = time.monotonic() + timeout
        while True:
            left = set(self.backend.list_jobs()) & self.jobs
            if not left or time.monotonic() > deadline:
                return left
            # Prepared envelopes tear themselves down asynchronously once the zygote is gone.
            time.sleep(0.02)
