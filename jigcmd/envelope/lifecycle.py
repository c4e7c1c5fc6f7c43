"""One envelope's life, supervised from the zygote's loop: prepared, run once, fenced, released.

The zygote clones pid 1 into its namespaces and cgroup (spawning.py); pid 1 builds the root
and spawns the candidate without a fork (pid1.py); docs/envelope.md draws the shape.

An `Envelope` is the state machine (its states are `states.State`); how it ends, from any
state, is its other half, `fencing.Fencing`; what it holds in the kernel, and the proof that
all of it is let go of, is `holdings.Holdings`; its reports to the server are
`reporting.RunChannel`.
It never blocks the loop on its pid 1 (with one bounded exception, a fence that had to kill,
see `Holdings.kill_and_wait`): each step ends by waiting for an event the loop hands back (a
status line of pid 1, its pidfd turning readable, the run socket, a timer).

Everything that does not depend on the request happens while preparing, before any
request exists: the cgroup is created (pid 1 is born in it), the namespaces made, the root
built. A request then costs only the go: pid 1 writes the candidate files, seals `/work`,
drops its privileges and spawns Bun once the server opens the gate. Each envelope serves
exactly one request.

The zygote outlives the server: losing the run socket counts as a cancel, so the tree is
fenced and released either way, and the journal row is closed through `ledger.py`. Pid 1
dies with the zygote (its control socket closing while it prepares, `PR_SET_PDEATHSIG` once
prepared), which makes the kernel kill everything in the pid namespace: nothing outlives its
keeper.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from jigcmd import trace
from jigcmd.envelope import cgroups, ledger, oomscore, statusline
from jigcmd.envelope.failure import StepError
from jigcmd.envelope.fencing import Fencing
from jigcmd.envelope.holdings import Holdings, Watcher
from jigcmd.envelope.ledger import Owner, Registry
from jigcmd.envelope.marshalcodec import MARSHAL
from jigcmd.envelope.messages import Go, Launch, Started, send_message
from jigcmd.envelope.reporting import RunChannel
from jigcmd.envelope.states import State
from jigcmd.signames import signal_name

if TYPE_CHECKING:
    # For the types alone: evidence's msgspec stays out of the zygote's image.
    from jigcmd.envelope.reporting import Ending
    from jigcmd.envelope.spawner import Spawner
    from jigcmd.plan import RunPlan

__all__ = ["LAUNCH_FDS", "Envelope", "Loop", "shape"]

_SETUP_GRACE = 5.0
# stdin, stdout, stderr, gate, run socket, and the slot lock when the run reserved one.
LAUNCH_FDS = 6


def shape(plan: RunPlan) -> tuple[object, ...]:
    """What a prepared envelope fixes: everything but the request's own data."""
    return (plan.profile, plan.binds, plan.limits)


class Loop(Watcher, Protocol):
    """What an envelope needs of the zygote's loop: to watch descriptors, and to be told."""

    # Who clones pid 1 (spawner.py), or None: the loop's own process.
    spawner: Spawner | None

    def built(self, envelope: Envelope) -> None:
        """`envelope` is prepared: the next preparation may start."""

    def done(self, envelope: Envelope) -> None:
        """`envelope` is released (or given up); the loop forgets it."""


def _guarded(handler: Callable[[Envelope], None]) -> Callable[[Envelope], None]:
    """An event handler whose unexpected failure fails its envelope, never the zygote."""

    @functools.wraps(handler)
    def guarded(self: Envelope) -> None:
        try:
            handler(self)
        except Exception as exc:  # noqa: BLE001 - one envelope's bug must not end the others
            self.crashed(exc)

    return guarded


class Envelope(Fencing):
    """One envelope and its one run, driven by the zygote's loop (its end: `Fencing`)."""

    loop: Loop

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
        # Everything the envelope holds in the kernel, and how it is let go of.
        self.held = Holdings(loop, ledger.Registration(registry))
        self.state = State.UNSHARING
        # When `on_timer` is due (monotonic), or None.
        self.timer: float | None = None
        self.shape: tuple[object, ...] | None = None
        self.netns: str | None = None
        self.buffer = b""
        self.cpu_at_go: int | None = None
        # Pid 1's own OOM score while it holds the candidate's pinned one (see oomscore.py).
        self.init_oom: bytes | None = None
        # The run: its launch, socket, owner and how it ended.
        self.launch: Launch | None = None
        self.run: RunChannel | None = None
        # The run's moments (monotonic seconds, one clock): the launch taken here, and the
        # candidate's start as pid 1 took it (`statusline.Status`). Setup is the first to the
        # second.
        self.launched = 0.0
        self.started = 0.0
        self.wall_ms = 0.0
        self.ending: Ending | None = None
        self.stats: cgroups.CgroupStats | None = None
        self.failed = False

    # -- prepare -----------------------------------------------------------------------

    def prepare(self, plan: RunPlan) -> None:
        """Create the job and clone pid 1 for plans shaped like `plan`; the loop does the rest.

        Raises StepError when nothing could be started (the caller tears down what exists).
        """
        trace.mark("supervisor: preparing")
        status_r, pidfd = self.held.start(
            f"jigcmd-{self.run_id}", plan, self.backend, self.loop.spawner
        )
        self.loop.watch(status_r, self._on_status)
        self.loop.watch(pidfd, self._on_init_exit)
        self.shape = shape(plan)
        self.state = State.UNSHARING
        self.timer = time.monotonic() + _SETUP_GRACE

    def _unshared(self) -> None:
        self.netns = self.held.let_build()
        self.state = State.BUILDING
        trace.mark("supervisor: id maps written")

    def _prepared(self) -> None:
        job, init = self.held.job, self.held.init_pid
        assert job is not None and init is not None
        self.held.take_scratch()
        if oomscore.PINNED:
            self.init_oom = self.held.pin_oom_score()
        # "prepared" means every process of the envelope is blocked until the go: what the
        # cgroup has used so far is the preparation's, not the run's. Read it now, off the
        # request's path (the first read of cpu.stat after idle flushes per-CPU counters,
        # ~0.3 ms here).
        with contextlib.suppress(OSError):
            self.cpu_at_go = job.cpu_usage_ns()
        self.state = State.PREPARED
        self.timer = None
        trace.mark("supervisor: waiting")
        self.loop.built(self)
        if self.launch is not None:
            self._go()

    # -- launch ------------------------------------------------------------------------

    def take(self, launch: Launch, fds: list[int]) -> None:
        """Run `launch` here: now if prepared (for its shape), once prepared otherwise."""
        trace.mark("supervisor: launch")
        self.launched = time.monotonic()
        self.launch = launch
        self.held.stdio = (fds[0], fds[1], fds[2], fds[3])
        self.run = RunChannel(fds[4], Owner.of(launch))
        # The envelope slot's lock is held until the envelope is released (or the zygote
        # dies), whatever happens to the server.
        self.held.slot_fd = fds[5] if len(fds) == LAUNCH_FDS else -1
        try:
            self._take()
        except Exception as exc:  # noqa: BLE001 - one envelope's bug must not end the others
            self.crashed(exc)

    def _take(self) -> None:
        assert self.run is not None and self.launch is not None
        launch = self.launch
        if self.run.peer_gone():
            # The server died after sending this launch (it sat in a queue): start nothing
            # and claim nothing; recovery closes the row as uncertain.
            self._abandon()
            return
        try:
            if self.held.job is None:
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
        held = self.held
        assert held.control is not None and held.job is not None
        assert self.launch is not None and held.stdio is not None and self.run is not None
        plan = self.launch.plan
        if self.run.peer_gone():
            raise StepError("server", "the server went away before the candidate ran")
        if shape(plan) != self.shape:
            # Pid 1 runs the go with its prepared plan's binds and limits (see `Go`).
            raise StepError("start candidate", "the launch's shape is not the prepared one")
        trace.mark("supervisor: ready to go")
        if plan.cpus:
            try:
                # From the host side, where the host offers a cpuset: the candidate cannot
                # widen it. Pid 1 sets the affinity mask the candidate inherits to the same
                # CPUs in any case (see pid1.py).
                held.job.pin(plan.cpus)
            except OSError as exc:
                raise StepError("cpu pin", exc) from exc
        stdio, held.stdio = held.stdio, None
        try:
            go = Go(plan.argv, plan.env, plan.cwd, plan.files, plan.cpus, plan.program)
            send_message(held.control, go, list(stdio), codec=MARSHAL)
        except OSError as exc:
            raise StepError("start candidate", exc) from exc
        finally:
            for fd in stdio:
                os.close(fd)
        self.state = State.STAGED
        self.timer = min(plan.deadline, time.monotonic() + _SETUP_GRACE)

    def _ready(self) -> None:
        job, init = self.held.job, self.held.init_pid
        assert job is not None and init is not None and self.run is not None
        trace.mark("supervisor: candidate exec'd")
        if self.init_oom is not None:
            # The candidate inherited the pinned score at its spawn; pid 1 goes back to its
            # own. Not fatal: the candidate runs, and a pid 1 left at 1000 only risks being
            # the one the job's OOM killer kills, an UNCERTAIN run that names the job's OOM
            # kill (`reporting.init_lost`), never a false outcome. Unpinned, the candidate can bring
            # that about itself: it lowers its score to pid 1's and holds the job's memory in
            # no process's RSS (memfds), and pid 1 is then the largest process in the job.
            with contextlib.suppress(OSError):
                oomscore.write(init, self.init_oom)
            self.init_oom = None
        self.run.send(
            Started(
                supervisor_pid=os.getpid(),
                init_pid=init,
                cgroup_paths=job.paths,
                netns=self.netns or "",
                setup_ms=(self.started - self.launched) * 1000,
            ),
        )
        self.state = State.RUNNING
        assert self.launch is not None
        self.timer = self.launch.plan.deadline
        self.loop.watch(self.run.fileno(), self._on_run_socket)

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
            data = os.read(self.held.status_r, 4096)
        except BlockingIOError:
            return
        if not data:
            # Pid 1 is exiting; its pidfd says when it is gone (`_on_init_exit`).
            self._close_status()
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
        try:
            status = statusline.parse(line)
        except ValueError as exc:
            raise StepError("envelope", f"{exc} while {self.state.value}") from exc
        expected = {
            State.UNSHARING: ("unshared", self._unshared),
            State.BUILDING: ("prepared", self._prepared),
            State.STAGED: ("ready", self._ready),
        }.get(self.state)
        if expected is not None and status.kind == expected[0]:
            if status.kind == "ready":
                self.started = status.moment
            expected[1]()
            return
        if status.kind in ("exit", "signal") and self.state in (State.RUNNING, State.FENCING):
            ending: Ending = (status.number, None, "exited")
            if status.kind == "signal":
                ending = (None, signal_name(status.number), "exited")
            if self.state is State.RUNNING:
                self._ended(ending, status.moment)
            else:
                self._ended_while_stopping(ending)
            return
        raise StepError("envelope", f"unexpected status {line!r} while {self.state.value}")

    @_guarded
    def _on_init_exit(self) -> None:
        """Pid 1 is gone (its pidfd turned readable): so is everything in its namespace."""
        if self.held.status_r >= 0:
            self._on_status()  # its last words first
            if self.held.status_r >= 0 and self.state is not State.DONE:
                self._on_status()
        self.held.reap()
        if self.state is State.DONE:
            return
        try:
            if self.state in (State.SETTLING, State.FENCING):
                self._finish()
            elif self.state is State.RUNNING:
                self._init_lost("the candidate ran")
            elif self.state is State.STAGED:
                # After its go pid 1 spawns Bun once the server's gate opens, and tells so only
                # when Bun lets it run on their shared CPU: Bun may well be running already.
                self._init_lost("the candidate may have started")
            else:
                raise StepError(
                    "envelope", f"pid 1 exited without an answer while {self.state.value}"
                )
        except StepError as exc:
            self._fail(exc)

    @_guarded
    def _on_run_socket(self) -> None:
        """The server wrote (a cancel) or went away while the candidate runs."""
        assert self.run is not None
        reason = self.run.stop_wanted()
        if reason is not None:
            # A cancel, or the server is gone: fence now, never leave it running.
            self._stop(reason)

    def _forget(self) -> None:
        """The loop forgets this envelope (`Fencing._close`)."""
        self.loop.done(self)
