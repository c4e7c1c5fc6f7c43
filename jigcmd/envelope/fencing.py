"""How an envelope's life ends, from any state: fenced, released, reported once, forgotten.

The ways in are few: the candidate's end as pid 1 reports it (`_ended`: a settle while pid 1
exits with it, then the fence), a stop (`_stop`: a cancel, the deadline, the server gone), a
pid 1 lost without a report (`_init_lost`), a failed step (`_fail`), a handler's unexpected
exception (`crashed`) and a teardown ahead of any request (`teardown`). The way out is one:
the tree killed and gone and the job removed (`Holdings.release`), the envelope slot freed
before the answer leaves, the server told when a launch is here (`RunChannel`), then the
loop forgets the envelope (`_close`). `Fencing` is the half of `lifecycle.Envelope` that
does this; the other half is the state machine that gets an envelope to run, and decides
when it ends.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING

from jigcmd import trace
from jigcmd.envelope import reporting
from jigcmd.envelope.failure import StepError
from jigcmd.envelope.holdings import EMPTY_WAIT
from jigcmd.envelope.messages import INIT_LOST
from jigcmd.envelope.states import State

if TYPE_CHECKING:
    # For the types alone: evidence's msgspec stays out of the zygote's image.
    from jigcmd.envelope import cgroups
    from jigcmd.envelope.holdings import Holdings, Watcher
    from jigcmd.envelope.messages import Launch
    from jigcmd.envelope.reporting import Ending, RunChannel
    from jigcmd.envelope.scratchfile import ScratchRead
    from jigcmd.evidence import StopReason

__all__ = ["Fencing"]

# How long a pid 1 that is exiting by itself may take before it is killed like the rest.
_SETTLE_S = 1.0


class Fencing:
    """The end of one envelope and its run; `lifecycle.Envelope` sets what it reads."""

    loop: Watcher
    held: Holdings
    state: State
    timer: float | None
    shape: tuple[object, ...] | None
    launch: Launch | None
    run: RunChannel | None
    started: float
    wall_ms: float
    ending: Ending | None
    stats: cgroups.CgroupStats | None
    cpu_at_go: int | None
    # A step failed (`_fail`): the loop reads it once the envelope is forgotten.
    failed: bool

    def _forget(self) -> None:
        """The loop forgets this envelope (the subclass knows its loop: `Loop.done`)."""
        raise NotImplementedError

    def _ended(self, ending: Ending, at: float) -> None:
        """Pid 1 reported the candidate's end (at `at`), after it SIGKILLed the rest of its
        namespace."""
        job = self.held.job
        assert job is not None and self.run is not None
        self.ending = ending
        self.wall_ms = (at - self.started) * 1000
        trace.mark("supervisor: candidate ended")
        self._unwatch_sock()
        # Pid 1's last words: nothing follows them but its exit, which the pidfd reports.
        # Closed now, the pipe's EOF at that exit wakes nothing here (a wake-up that would
        # preempt pid 1's exit, which the cleanup's proof waits for).
        self._close_status()
        # The server completes the output and records it while the cleanup runs; the
        # answer still waits for `Finished`.
        self.run.ended(ending)
        # The accounting is final but for pid 1's own exit: read it while pid 1 exits (the
        # first read after a run flushes per-CPU counters, ~0.4 ms here).
        with contextlib.suppress(OSError):
            self.stats = job.stats()
        if self.held.init_pid is None:
            self._finish()
            return
        # Pid 1 exits with its candidate, and the kernel kills whatever is left in the pid
        # namespace: wait for that before reaching for the kill switches (a cgroup.kill
        # while the namespace is dying was measured at ~12 ms here).
        self.state = State.SETTLING
        self.timer = time.monotonic() + _SETTLE_S

    def _ended_while_stopping(self, ending: Ending) -> None:
        """Pid 1 reported the candidate's end after a stop (cancel, deadline, lost server) began.

        The candidate may have ended on its own just before the stop was acted on (its end
        and the stop were ready in one turn of the loop, or it ended while the kill was on its
        way). An exit, or a signal the stop never sends, is that own end: it is the run's
        evidence (`exited`). A SIGKILL is the stop's (or indistinguishable from it): the
        stop's ending stands. Either way the fence and the release go on as they are.
        """
        assert self.ending is not None
        if self.ending[2] != "exited" and ending[1] != "SIGKILL":
            trace.mark("supervisor: candidate ended before the stop")
            self.ending = ending

    def _stop(self, reason: StopReason) -> None:
        self.ending = ending = (None, "SIGKILL", reason)
        self.wall_ms = (time.monotonic() - self.started) * 1000
        self._unwatch_sock()
        if self.run is not None:
            self.run.ended(ending)
        self._kill()

    def _kill(self) -> None:
        """SIGKILL the whole tree; the pidfd tells when pid 1 (and its namespace) is gone."""
        self.held.signal_tree()
        if self.held.init_pid is None:
            self._finish()
            return
        self.state = State.FENCING
        self.timer = time.monotonic() + EMPTY_WAIT

    def _init_lost(self, started: str) -> None:
        # Nobody cancelled and nothing proves how the candidate ended: no evidence, no
        # signal is invented. Fenced and released; the server records it uncertain, in
        # words that name an OOM kill in the job when its count says there was one
        # (`reporting.init_lost`).
        self._unwatch_sock()
        job, oom_killed = self.held.job, None
        try:
            oom_killed = job.stats().oom_killed if job is not None else None
        except Exception as exc:  # noqa: BLE001 - unread, the cause is unknown; still UNCERTAIN
            trace.mark(f"supervisor: OOM count unread: {exc!r}")
        limit = self.launch.plan.limits.memory_bytes if self.launch is not None else 0
        self._fail(StepError(INIT_LOST, reporting.init_lost(started, oom_killed, limit)))

    def _finish(self) -> None:
        job = self.held.job
        assert job is not None and self.ending is not None
        trace.mark("supervisor: fenced")
        if self.stats is None:
            with contextlib.suppress(OSError):
                self.stats = job.stats()
        scratch = self._read_scratch()
        ok, problems = self._release()
        # The slot is free before the answer leaves: a caller that got its answer finds
        # the slot free, never "all slots in use" from a run that is already over.
        self.held.free_slot()
        trace.mark("supervisor: released")
        if self.run is not None:
            report = reporting.finished(
                self.ending,
                wall_ms=self.wall_ms,
                stats=self.stats,
                cpu_at_go=self.cpu_at_go,
                cleanup=(ok, problems),
                scratch=scratch,
            )
            self.run.finished(report)
        self._close()

    def _fail(self, exc: StepError) -> None:
        """A step failed: fence, release, and tell the server (if a launch is here)."""
        if self.state is State.DONE:
            return
        self.failed = True
        self.held.kill_and_wait()
        ok, problems = self._release()
        self.held.free_slot()
        # Without a launch (a preparation ahead of any request) nobody waits for a report.
        if self.run is not None:
            self.run.failed(exc, ok, problems)
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
                self._forget()

    def _abandon(self) -> None:
        self.held.close_stdio()
        self.teardown()

    def teardown(self) -> None:
        """Fence and release whatever a (partial) preparation built; the envelope is done."""
        if self.state is State.DONE:
            return
        self.held.kill_and_wait()
        self._release()
        self.held.free_slot()
        self._close()

    def _release(self) -> tuple[bool, tuple[str, ...]]:
        """The tree is gone and the job removed, proved (`Holdings.release`)."""
        self.shape = None
        return self.held.release()

    def _unwatch_sock(self) -> None:
        if self.run is not None and self.state is State.RUNNING:
            self.loop.unwatch(self.run.fileno())

    def _close(self) -> None:
        """Let go of everything still held; the loop forgets this envelope."""
        self._unwatch_sock()
        self.state = State.DONE
        self.timer = None
        if self.run is not None:
            self.run.close()
            self.run = None
        self.held.close()
        trace.mark("supervisor: exit")
        self._forget()

    def _read_scratch(self) -> ScratchRead | None:
        """The plan's scratch file, read once every process of the run is gone."""
        if self.launch is None or self.launch.plan.scratch_file is None:
            return None
        return self.held.read_scratch(self.launch.plan.scratch_file)

    def _close_status(self) -> None:
        self.loop.unwatch(self.held.status_r)
        os.close(self.held.status_r)
        self.held.status_r = -1
