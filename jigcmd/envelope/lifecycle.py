"""One envelope's life, supervised from the zygote's loop: prepared, run once, fenced, released.

Process shape (the zygote clones pid 1; pid 1 spawns the candidate without a fork):

    zygote  (host root; supervises every envelope from one loop: owns the cgroups, the
      │      deadlines and the cleanup; see zygote.py)
      └─ init, pid 1: clone3 into new user/mnt/pid/ipc/uts namespaces (and the fresh netns
         the zygote entered for it), born in the job's cgroup2 directory; joins the v1
         hierarchies, makes its cgroup namespace, builds the root (see pid1.py)
           └─ candidate: Bun, posix_spawned by pid 1 after pid 1 dropped its privileges

An `Envelope` never blocks the loop on its pid 1 (with one bounded exception, a fence
that had to kill, see `teardown`): each step ends by waiting for an event the loop hands
back (a status line of pid 1, its pidfd turning readable, the run socket, a timer).

Everything that does not depend on the request happens while preparing, before any
request exists: the cgroup is created (pid 1 is born in it), the namespaces made, the root
built. A request then costs only the go: pid 1 writes the candidate files, seals `/work`,
drops its privileges and spawns Bun once the server opens the gate. Each envelope serves
exactly one request.

The zygote outlives the server: losing the run socket counts as a cancel, so the tree is
fenced and released either way, and the journal row is closed through `ledger.py`. Pid 1
dies with the zygote (`PR_SET_PDEATHSIG`, or its control socket closing before the go),
which makes the kernel kill everything in the pid namespace: nothing outlives its keeper.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import functools
import os
import select
import signal
import socket
import time
from collections.abc import Callable
from typing import Protocol

from jigcmd import trace
from jigcmd.envelope import cgroups, idmap, ledger, oomscore, pid1, rootfs, scratchfile, spawning
from jigcmd.envelope.api import ScratchRead
from jigcmd.envelope.failure import StepError
from jigcmd.envelope.ledger import Owner, Registry
from jigcmd.envelope.messages import (
    INIT_LOST,
    Cancel,
    Ended,
    Failed,
    Finished,
    Go,
    Launch,
    Started,
    recv_message,
    send_message,
)
from jigcmd.envelope.pid1 import Handed
from jigcmd.evidence import StopReason
from jigcmd.plan import RunPlan

__all__ = ["LAUNCH_FDS", "Envelope", "Loop", "State", "shape"]

_EMPTY_WAIT = 2.0
_SETUP_GRACE = 5.0
# How long a pid 1 that is exiting by itself may take before it is killed like the rest.
_SETTLE_S = 1.0
# stdin, stdout, stderr, gate, run socket, and the slot lock when the run reserved one.
LAUNCH_FDS = 6


def shape(plan: RunPlan) -> tuple[object, ...]:
    """What a prepared envelope fixes: everything but the request's own data."""
    return (plan.profile, plan.binds, plan.limits)


class Loop(Protocol):
    """What an envelope needs of the zygote's loop."""

    def watch(self, fd: int, callback: Callable[[], None]) -> None:
        """Call `callback` whenever `fd` turns readable."""

    def unwatch(self, fd: int) -> None:
        """Stop watching `fd` (before it is closed)."""

    def built(self, envelope: Envelope) -> None:
        """`envelope` is prepared: the next preparation may start."""

    def done(self, envelope: Envelope) -> None:
        """`envelope` is released (or given up); the loop forgets it."""


class State(enum.Enum):
    """Where an envelope is; each waits for one kind of event."""

    UNSHARING = "unsharing"  # pid 1 cloned; waiting for "unshared"
    BUILDING = "building"  # id maps written; waiting for "prepared"
    PREPARED = "prepared"  # waiting for a launch
    STAGED = "staged"  # go sent; waiting for "ready" (after the server's gate)
    RUNNING = "running"  # waiting for the candidate's end, a cancel or the deadline
    SETTLING = "settling"  # the candidate ended; waiting for pid 1's own exit
    FENCING = "fencing"  # killed; waiting for pid 1 to be gone
    DONE = "done"


def _guarded(handler: Callable[[Envelope], None]) -> Callable[[Envelope], None]:
    """An event handler whose unexpected failure fails its envelope, never the zygote."""

    @functools.wraps(handler)
    def guarded(self: Envelope) -> None:
        try:
            handler(self)
        except Exception as exc:  # noqa: BLE001 - one envelope's bug must not end the others
            self.crashed(exc)

    return guarded


class Envelope:
    """One envelope and its one run, driven by the zygote's loop."""

    def __init__(
        self,
        loop: Loop,
        backend: cgroups.CgroupBackend,
        registry: Registry | None,
        envelope_id: str,
    ) -> None:
        self.loop = loop
        self.backend = backend
        self.run_id = envelope_id
        self.registration = ledger.Registration(registry)
        self.state = State.UNSHARING
        # When `on_timer` is due (monotonic), or None.
        self.timer: float | None = None
        self.job: cgroups.CgroupJob | None = None
        self.shape: tuple[object, ...] | None = None
        self.netns: str | None = None
        self.init_pid: int | None = None
        self.pidfd = -1
        self.control: socket.socket | None = None
        self.status_r = -1
        self.go_w = -1
        self.buffer = b""
        self.cpu_at_go: int | None = None
        # Pid 1's own OOM score while it holds the candidate's pinned one (see oomscore.py).
        self.init_oom: bytes | None = None
        # Pid 1's namespaces, held until after the answer (see `spawning.hold_namespaces`).
        self.namespaces: list[int] = []
        # The root of the envelope's scratch, from pid 1 (see `pid1._hand_over_scratch`).
        self.scratch_fd = -1
        # The run: its launch, descriptors, owner and how it ended.
        self.launch: Launch | None = None
        self.stdio: Handed | None = None
        self.sock: socket.socket | None = None
        self.slot_fd = -1
        self.owner: Owner | None = None
        self.launched = 0.0
        self.started = 0.0
        self.wall_ms = 0.0
        self.ending: tuple[int | None, str | None, StopReason] | None = None
        self.server_lost = False
        self.stats: cgroups.CgroupStats | None = None

    # -- prepare -----------------------------------------------------------------------

    def prepare(self, plan: RunPlan) -> None:
        """Create the job and clone pid 1 for plans shaped like `plan`; the loop does the rest.

        Raises StepError when nothing could be started (the caller tears down what exists).
        """
        trace.mark("supervisor: preparing")
        name = f"jigcmd-{self.run_id}"
        # Registered before it exists: if the zygote dies from here on, recovery knows the
        # cgroup job to fence and remove.
        try:
            self.registration.register(name)
        except OSError as exc:
            raise StepError("envelope registry", exc) from exc
        try:
            self.job = self.backend.create(name, plan.limits)
        except (OSError, ValueError) as exc:
            raise StepError("cgroup", exc) from exc
        trace.mark("supervisor: job created")
        memory_limit = self.job.memory_view()[1]
        template = rootfs.template(plan, memory_limit)
        control, init_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.control = control
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        go_r, go_w = os.pipe2(os.O_CLOEXEC)
        self.status_r, self.go_w = status_r, go_w
        keep = (init_end.fileno(), status_w, go_r)
        try:
            init, born_in = spawning.spawn_init(self.job, keep)
        except StepError:
            init_end.close()
            os.close(status_w)
            os.close(go_r)
            raise
        if init == 0:
            pid1.Init(plan, init_end, status_w, memory_limit, template).start(
                self.job, born_in, go_r
            )
        trace.mark("supervisor: pid 1 cloned")
        self.init_pid = init
        self.pidfd = os.pidfd_open(init)
        init_end.close()
        os.close(status_w)
        os.close(go_r)
        os.set_blocking(status_r, False)
        self.loop.watch(status_r, self._on_status)
        self.loop.watch(self.pidfd, self._on_init_exit)
        self.shape = shape(plan)
        self.state = State.UNSHARING
        self.timer = time.monotonic() + _SETUP_GRACE

    def _unshared(self) -> None:
        assert self.init_pid is not None
        init = self.init_pid
        held = spawning.hold_namespaces(init)
        self.namespaces = list(held.values())
        if "net" not in held:
            raise StepError("network namespace", "pid 1's network namespace cannot be opened")
        self.netns = f"net:[{os.fstat(held['net']).st_ino}]"
        try:
            idmap.write_id_maps(init)
        except OSError as exc:
            raise StepError("user namespace id maps", exc) from exc
        os.write(self.go_w, b"g")
        os.close(self.go_w)
        self.go_w = -1
        self.state = State.BUILDING
        trace.mark("supervisor: id maps written")

    def _prepared(self) -> None:
        assert self.job is not None and self.init_pid is not None
        self._take_scratch()
        if oomscore.PINNED:
            self._pin_oom_score(self.init_pid)
        # "prepared" means every process of the envelope is blocked until the go: what the
        # cgroup has used so far is the preparation's, not the run's. Read it now, off the
        # request's path (the first read of cpu.stat after idle flushes per-CPU counters,
        # ~0.3 ms here).
        with contextlib.suppress(OSError):
            self.cpu_at_go = self.job.cpu_usage_ns()
        self.state = State.PREPARED
        self.timer = None
        trace.mark("supervisor: waiting")
        self.loop.built(self)
        if self.launch is not None:
            self._go()

    def _take_scratch(self) -> None:
        """Receive the scratch descriptor pid 1 sent before it reported "prepared"."""
        assert self.control is not None
        try:
            _msg, fds, _flags, _addr = socket.recv_fds(
                self.control, 1, 1, socket.MSG_DONTWAIT | socket.MSG_CMSG_CLOEXEC
            )
        except OSError as exc:
            raise StepError("scratch descriptor", exc) from exc
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise StepError("scratch descriptor", "pid 1 sent none")
        self.scratch_fd = fds[0]

    def _read_scratch(self) -> ScratchRead | None:
        """The plan's scratch file, read once every process of the run is gone."""
        if self.launch is None or self.launch.plan.scratch_file is None:
            return None
        return scratchfile.read_scratch_file(self.scratch_fd, self.launch.plan.scratch_file)

    def _pin_oom_score(self, init: int) -> None:
        """Pin pid 1's score at the candidate's, for the spawn to pass on (see oomscore.py)."""
        try:
            with open(f"/proc/{init}/oom_score_adj", "rb") as handle:
                own = handle.read().strip() or b"0"
            oomscore.write(init, oomscore.CANDIDATE)
        except OSError as exc:
            raise StepError("oom score", exc) from exc
        self.init_oom = own

    # -- launch ------------------------------------------------------------------------

    def take(self, launch: Launch, fds: list[int]) -> None:
        """Run `launch` here: now if prepared (for its shape), once prepared otherwise."""
        trace.mark("supervisor: launch")
        self.launched = time.monotonic()
        self.launch = launch
        self.stdio = (fds[0], fds[1], fds[2], fds[3])
        self.sock = socket.socket(fileno=fds[4])
        # The envelope slot's lock is held until the envelope is released (or the zygote
        # dies), whatever happens to the server.
        self.slot_fd = fds[5] if len(fds) == LAUNCH_FDS else -1
        self.owner = Owner.of(launch)
        try:
            self._take()
        except Exception as exc:  # noqa: BLE001 - one envelope's bug must not end the others
            self.crashed(exc)

    def _take(self) -> None:
        assert self.sock is not None and self.launch is not None
        launch = self.launch
        if _peer_gone(self.sock):
            # The server died after sending this launch (it sat in a queue): start nothing
            # and claim nothing; recovery closes the row as uncertain.
            self._abandon()
            return
        try:
            if self.job is None:
                self._prepare_for(launch.plan)
            elif self.state is State.PREPARED:
                self._go()
            # Otherwise still preparing: `_prepared` goes on with the launch.
        except StepError as exc:
            self._fail(exc)

    def _prepare_for(self, plan: RunPlan) -> None:
        """Prepare cold for the launch (no envelope of its shape was at hand)."""
        if time.monotonic() >= plan.deadline:
            raise StepError("deadline", "deadline passed before setup")
        self.prepare(plan)

    def _go(self) -> None:
        assert self.control is not None and self.job is not None
        assert self.launch is not None and self.stdio is not None and self.sock is not None
        plan = self.launch.plan
        if _peer_gone(self.sock):
            raise StepError("server", "the server went away before the candidate ran")
        trace.mark("supervisor: ready to go")
        if plan.cpus:
            try:
                # From the host side, where the host offers a cpuset: the candidate cannot
                # widen it. Pid 1 sets the affinity mask the candidate inherits to the same
                # CPUs in any case (see pid1.py).
                self.job.pin(plan.cpus)
            except OSError as exc:
                raise StepError("cpu pin", exc) from exc
        stdio, self.stdio = self.stdio, None
        try:
            send_message(self.control, Go(plan=plan), list(stdio))
        except OSError as exc:
            raise StepError("start candidate", exc) from exc
        finally:
            for fd in stdio:
                os.close(fd)
        self.state = State.STAGED
        self.timer = min(plan.deadline, time.monotonic() + _SETUP_GRACE)

    def _ready(self) -> None:
        assert self.job is not None and self.init_pid is not None and self.sock is not None
        trace.mark("supervisor: candidate exec'd")
        if self.init_oom is not None:
            # The candidate inherited the pinned score at its spawn; pid 1 goes back to its
            # own. Not fatal: the candidate runs, and a pid 1 left at 1000 only risks being
            # the one an OOM kills (an uncertain outcome, never a false one).
            with contextlib.suppress(OSError):
                oomscore.write(self.init_pid, self.init_oom)
            self.init_oom = None
        self.started = time.monotonic()
        _send(
            self.sock,
            Started(
                supervisor_pid=os.getpid(),
                init_pid=self.init_pid,
                cgroup_paths=self.job.paths,
                netns=self.netns or "",
                setup_ms=(self.started - self.launched) * 1000,
            ),
        )
        self.state = State.RUNNING
        assert self.launch is not None
        self.timer = self.launch.plan.deadline
        self.loop.watch(self.sock.fileno(), self._on_run_socket)

    # -- events ------------------------------------------------------------------------

    @_guarded
    def on_timer(self) -> None:
        """The state's timer is due."""
        self.timer = None
        try:
            if self.state is State.RUNNING:
                self._stop("deadline")
            elif self.state is State.SETTLING:
                self._kill()
            elif self.state is State.FENCING:
                self._finish()  # pid 1 did not go in time: the release says what is left
            elif self.state is State.STAGED and self._past_deadline():
                # The gate did not open before the deadline (a slow admission): nothing ran.
                raise StepError("deadline", "deadline passed before the candidate started")
            elif self.state is not State.DONE:
                raise StepError("envelope", f"no answer from the envelope while {self.state.value}")
        except StepError as exc:
            self._fail(exc)

    def _past_deadline(self) -> bool:
        return self.launch is not None and time.monotonic() >= self.launch.plan.deadline

    @_guarded
    def _on_status(self) -> None:
        """Pid 1 wrote (or closed) its status pipe."""
        try:
            data = os.read(self.status_r, 4096)
        except BlockingIOError:
            return
        if not data:
            # Pid 1 is exiting; its pidfd says when it is gone (`_on_init_exit`).
            self.loop.unwatch(self.status_r)
            os.close(self.status_r)
            self.status_r = -1
            return
        self.buffer += data
        while b"\n" in self.buffer and self.state is not State.DONE:
            line, _, self.buffer = self.buffer.partition(b"\n")
            try:
                self._line(line.decode("utf-8", "replace"))
            except StepError as exc:
                self._fail(exc)

    def _line(self, line: str) -> None:
        if line.startswith("fail "):
            step, _, error = line[5:].partition("\t")
            raise StepError(step, error)
        expected = {
            State.UNSHARING: ("unshared", self._unshared),
            State.BUILDING: ("prepared", self._prepared),
            State.STAGED: ("ready", self._ready),
        }.get(self.state)
        if expected is not None and line.startswith(expected[0]):
            expected[1]()
            return
        if self.state is State.RUNNING:
            kind, _, value = line.partition(" ")
            if kind == "exit":
                self._ended((int(value), None, "exited"))
                return
            if kind == "signal":
                self._ended((None, signal.Signals(int(value)).name, "exited"))
                return
        raise StepError("envelope", f"unexpected status {line!r} while {self.state.value}")

    @_guarded
    def _on_init_exit(self) -> None:
        """Pid 1 is gone (its pidfd turned readable): so is everything in its namespace."""
        if self.status_r >= 0:
            self._on_status()  # its last words first
            if self.status_r >= 0 and self.state is not State.DONE:
                self._on_status()
        self._reap_init()
        if self.state is State.DONE:
            return
        try:
            if self.state in (State.SETTLING, State.FENCING):
                self._finish()
            elif self.state is State.RUNNING:
                self._init_lost()
            else:
                raise StepError(
                    "envelope", f"pid 1 exited without an answer while {self.state.value}"
                )
        except StepError as exc:
            self._fail(exc)

    @_guarded
    def _on_run_socket(self) -> None:
        """The server wrote (a cancel) or went away while the candidate runs."""
        assert self.sock is not None
        try:
            message = recv_message(self.sock)
        except (OSError, EOFError, ValueError):
            message = None
        if message is None or isinstance(message[0], Cancel):
            # A cancel, or the server is gone: fence now, never leave it running.
            self.server_lost = message is None
            self._stop("cancelled")

    # -- the end -----------------------------------------------------------------------

    def _ended(self, ending: tuple[int | None, str | None, StopReason]) -> None:
        """Pid 1 reported the candidate's end, after it SIGKILLed the rest of its namespace."""
        assert self.job is not None and self.sock is not None
        self.ending = ending
        self.wall_ms = (time.monotonic() - self.started) * 1000
        trace.mark("supervisor: candidate ended")
        self._unwatch_sock()
        # The server completes the output and records it while the cleanup runs; the
        # answer still waits for `Finished`.
        _send(self.sock, Ended(exit_code=ending[0], signal=ending[1], stop_reason=ending[2]))
        # The accounting is final but for pid 1's own exit: read it while pid 1 exits (the
        # first read after a run flushes per-CPU counters, ~0.4 ms here).
        with contextlib.suppress(OSError):
            self.stats = self.job.stats()
        if self.init_pid is None:
            self._finish()
            return
        # Pid 1 exits with its candidate, and the kernel kills whatever is left in the pid
        # namespace: wait for that before reaching for the kill switches (a cgroup.kill
        # while the namespace is dying was measured at ~12 ms here).
        self.state = State.SETTLING
        self.timer = time.monotonic() + _SETTLE_S

    def _stop(self, reason: StopReason) -> None:
        self.ending = (None, "SIGKILL", reason)
        self.wall_ms = (time.monotonic() - self.started) * 1000
        self._unwatch_sock()
        if not self.server_lost and self.sock is not None:
            _send(self.sock, Ended(exit_code=None, signal="SIGKILL", stop_reason=reason))
        self._kill()

    def _kill(self) -> None:
        """SIGKILL the whole tree; the pidfd tells when pid 1 (and its namespace) is gone."""
        self._signal_tree()
        if self.init_pid is None:
            self._finish()
            return
        self.state = State.FENCING
        self.timer = time.monotonic() + _EMPTY_WAIT

    def _init_lost(self) -> None:
        # Nobody cancelled and nothing proves how the candidate ended: no evidence, no
        # signal is invented. Fenced and released; the server records it uncertain.
        self._unwatch_sock()
        self._fail(
            StepError(
                INIT_LOST,
                "pid 1 of the envelope died without reporting how the candidate ended "
                "(killed from outside); the candidate ran, its outcome is unknown",
            )
        )

    def _finish(self) -> None:
        assert self.job is not None and self.ending is not None
        trace.mark("supervisor: fenced")
        if self.stats is None:
            with contextlib.suppress(OSError):
                self.stats = self.job.stats()
        scratch = self._read_scratch()
        ok, problems = self._release()
        # The slot is free before the answer leaves: a caller that got its answer finds
        # the slot free, never "all slots in use" from a run that is already over.
        self._free_slot()
        trace.mark("supervisor: released")
        if self.server_lost and self.owner is not None:
            # Nobody will record this run's outcome: the server is gone, and with it the
            # output. Record what is proved: fenced, cleanup as confirmed, no result.
            self.owner.lost(ok, problems)
        stats = self.stats or cgroups.CgroupStats(None, None, False, False)
        cpu_ms = None
        if stats.cpu_usage_ns is not None:
            cpu_ms = (stats.cpu_usage_ns - (self.cpu_at_go or 0)) / 1e6
        exit_code, sig, reason = self.ending
        delivered = self.sock is not None and _send(
            self.sock,
            Finished(
                exit_code=exit_code,
                signal=sig,
                stop_reason=reason,
                wall_ms=self.wall_ms,
                cpu_ms=cpu_ms,
                peak_memory_bytes=stats.peak_memory_bytes,
                oom_killed=stats.oom_killed,
                pids_limit_hit=stats.pids_limit_hit,
                cleanup_complete=ok,
                cleanup_problems=problems,
                scratch_file=scratch,
            ),
        )
        if not delivered and self.owner is not None and not self.server_lost:
            # The server vanished just as the run ended; nobody else can record it.
            self.owner.lost(ok, problems)
        self._close()

    def _fail(self, exc: StepError) -> None:
        """A step failed: fence, release, and tell the server (if a launch is here)."""
        if self.state is State.DONE:
            return
        self.teardown_tree()
        ok, problems = self._release()
        self._free_slot()
        if self.sock is None:
            # A preparation ahead of any request: nothing to report, nobody waits.
            self._close()
            return
        if self.owner is not None and (exc.step == "server" or self.server_lost):
            self.owner.lost(ok, problems)
        _send(
            self.sock,
            Failed(step=exc.step, error=exc.error, cleanup_complete=ok, cleanup_problems=problems),
        )
        self._close()

    def crashed(self, exc: Exception) -> None:
        """A handler raised: fail the envelope (or at least tear it down), and say why."""
        trace.mark(f"supervisor: crashed: {exc!r}")
        try:
            self._fail(StepError("envelope", f"internal error: {type(exc).__name__}: {exc}"))
        except Exception:  # noqa: BLE001 - the last resort: nothing of it may stay
            with contextlib.suppress(Exception):
                self.teardown()
            if self.state is not State.DONE:
                self.state = State.DONE
                self.loop.done(self)

    def _abandon(self) -> None:
        for fd in self.stdio or ():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.stdio = None
        self.teardown()

    def teardown(self) -> None:
        """Fence and release whatever a (partial) preparation built; the envelope is done."""
        if self.state is State.DONE:
            return
        self.teardown_tree()
        self._release()
        self._free_slot()
        self._close()

    def teardown_tree(self) -> None:
        """SIGKILL the tree and wait (bounded, blocking) for pid 1 to be gone.

        The one wait that blocks the loop: a kill of an envelope that never ran or whose
        step failed; a SIGKILLed pid 1 goes in a few milliseconds.
        """
        for fd in self.stdio or ():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.stdio = None
        self._signal_tree()
        if self.init_pid is not None and self.pidfd >= 0:
            select.select([self.pidfd], [], [], _EMPTY_WAIT)
            self._reap_init()

    def _signal_tree(self) -> None:
        if self.job is not None and (self.init_pid is not None or self._populated()):
            with contextlib.suppress(OSError):
                self.job.kill()
        if self.init_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, signal.SIGKILL)

    def _populated(self) -> bool:
        assert self.job is not None
        try:
            return self.job.populated()
        except OSError:
            return True

    def _reap_init(self) -> None:
        """Collect pid 1 if it is gone (`wait4`: its own usage, for the trace)."""
        if self.init_pid is None:
            return
        try:
            pid, _status, usage = os.wait4(self.init_pid, os.WNOHANG)
        except ChildProcessError:
            pid, usage = self.init_pid, None
        if pid == 0:
            return
        if usage is not None:
            trace.mark("supervisor: pid 1 reaped")
        self.init_pid = None
        if self.pidfd >= 0:
            self.loop.unwatch(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = -1

    def _release(self) -> tuple[bool, tuple[str, ...]]:
        """Confirm the tree is gone and remove the cgroup (the namespaces go after the answer)."""
        problems: list[str] = []
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.scratch_fd >= 0:
            os.close(self.scratch_fd)
            self.scratch_fd = -1
        if self.job is not None:
            if not self._removed_at_once(problems):
                self._remove_once_empty(problems)
            self.job = None
        # The network namespace has no name or mount and the scratch is a tmpfs inside the
        # mount namespace: no process is left in either (the empty cgroup above confirms
        # it); they are freed when `_close` drops the last reference.
        if not problems:
            self.registration.drop()
        self.shape = None
        return not problems, tuple(problems)

    def _removed_at_once(self, problems: list[str]) -> bool:
        """Pid 1 reaped means its namespace is empty: remove the job without a look first.

        The kernel refuses to remove a cgroup that still holds a task (EBUSY), so the
        removal is the proof; nothing can join a cgroup whose members are gone.
        """
        if self.init_pid is not None:
            return False
        assert self.job is not None
        try:
            self.job.remove(wait=0.0)
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                return False
            problems.append(f"cgroup not removed: {exc}")
        return True

    def _remove_once_empty(self, problems: list[str]) -> None:
        assert self.job is not None
        try:
            empty = self.job.wait_empty(_EMPTY_WAIT)
        except OSError as exc:
            problems.append(f"cgroup state unreadable: {exc}")
            return
        if not empty:
            problems.append("cgroup still populated after kill")
            return
        try:
            self.job.remove()
        except OSError as exc:
            problems.append(f"cgroup not removed: {exc}")

    def _free_slot(self) -> None:
        if self.slot_fd >= 0:
            os.close(self.slot_fd)
            self.slot_fd = -1

    def _unwatch_sock(self) -> None:
        if self.sock is not None and self.state is State.RUNNING:
            self.loop.unwatch(self.sock.fileno())

    def _close(self) -> None:
        """Let go of everything still held; the loop forgets this envelope."""
        self._unwatch_sock()
        self.state = State.DONE
        self.timer = None
        for fd in (self.status_r, self.go_w, self.pidfd):
            if fd >= 0:
                if fd != self.go_w:
                    self.loop.unwatch(fd)
                os.close(fd)
        self.status_r = self.go_w = self.pidfd = -1
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        trace.mark("supervisor: closed")
        # The kernel tears the namespaces down now, after the answer.
        for fd in self.namespaces:
            os.close(fd)
        self.namespaces = []
        trace.mark("supervisor: exit")
        self.loop.done(self)


def _peer_gone(sock: socket.socket) -> bool:
    """Whether the server closed its end of the run socket (a pending message is not EOF)."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLRDHUP)
    for _fd, events in poller.poll(0):
        if events & (select.POLLHUP | select.POLLRDHUP):
            return True
        if events & select.POLLIN:
            try:
                return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
            except BlockingIOError:
                return False
            except OSError:
                return True
    return False


def _send(sock: socket.socket, message: Started | Ended | Finished | Failed) -> bool:
    """Report to the server; False when it is gone (the journal then records the run)."""
    try:
        send_message(sock, message)
    except OSError:
        return False
    return True
