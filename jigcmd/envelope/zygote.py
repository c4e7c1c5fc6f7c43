"""The zygote: a pre-started, single-threaded process that clones and supervises every envelope.

Why a separate process: the anyio server is multi-threaded (worker threads), and forking a
multithreaded Python then running Python before exec can deadlock; starting a fresh
interpreter per run costs ~30 ms. The zygote is started once with a minimal environment (so
the memory image every pid 1 is cloned from holds no credentials), imports everything a run
needs up front, and has one pid 1 per envelope cloned straight into its namespaces and
cgroup: the only process forked on a request's path (see lifecycle.py). The clone is made
by the spawner, forked once from the zygote, with `CLONE_PARENT`, so that each pid 1 is
still the zygote's child and the zygote's pages are not shared with every live pid 1
(spawner.py); without a spawner the zygote clones pid 1 itself.

It supervises all envelopes from one loop (epoll over the control socket, each pid 1's
status pipe and pidfd, each run's socket; timers for deadlines): no supervisor process per
envelope. It keeps envelopes prepared for the last plan shape it saw (a `Warm` hint) and
names each to the server (`Ready`, never waiting for the server to read it: outbox.py)
before any request, so that the server's journal row names the envelope that will serve
it. Every `Launch` comes here, on the control socket; one naming a prepared envelope runs
in it, any other is prepared cold. Every envelope serves one request and is then destroyed.

Preparing costs CPU, and on two cores it slows whatever it runs beside; when the pool is
topped up (never between a launch and its candidate's start, after the answer, later for a
caller calling back to back) is refill.py's policy. Preparations run one at a time: the
oldest, which the next launch goes to, is ready soonest.

Run as `python -m jigcmd.envelope.zygote FD` where FD is a connected unix stream socket.
When the server goes away (EOF) the zygote tears its prepared envelopes down, finishes
supervising the running ones (each run's socket closed too: they are fenced, and their rows
closed through `ledger.py`), and exits. When the zygote dies, each pid 1 dies with it
(`PR_SET_PDEATHSIG`, or its control socket closing), and recovery fences what is left.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import socket
import sys
import time

from jigcmd import trace
from jigcmd.envelope import cgroups, netns, privileges, records, runtimeshare, seccomp, staging
from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.failure import StepError
from jigcmd.envelope.ledger import Registry
from jigcmd.envelope.lifecycle import LAUNCH_FDS, Envelope, shape
from jigcmd.envelope.loop import EventLoop
from jigcmd.envelope.marshalcodec import MARSHAL
from jigcmd.envelope.messages import (
    REFILL_AFTER_MS,
    Answered,
    Launch,
    Ready,
    Warm,
    frame,
    recv_message,
)
from jigcmd.envelope.outbox import Outbox
from jigcmd.envelope.refill import Refill
from jigcmd.envelope.spawner import Spawner, sweep
from jigcmd.envelope.states import State
from jigcmd.journal.identity import identify
from jigcmd.plan import Bind, RunPlan

__all__ = ["main", "return_free_heap"]

_MAX_POOL = 16
_PR_SET_CHILD_SUBREAPER = 36
# A launched envelope in these has not started its candidate yet (refill.py).
_STARTING = frozenset((State.UNSHARING, State.BUILDING, State.PREPARED, State.STAGED))
# After the spawner went away mid-clone, an idle loop still looks for the pid 1 it may have
# left (which exits once its preparation is fenced) this often, for this long.
_SWEEP_EVERY_S = 0.1
_SWEEP_S = 10.0
# The binds to stage at the start, as the server wrote them (argv[4], `wire.argument`).
_BINDS = records.Reader[tuple[Bind, ...]](tuple[Bind, ...])


class _Zygote(EventLoop):
    def __init__(
        self,
        control: socket.socket,
        backend: cgroups.CgroupBackend,
        registry: Registry | None,
        spawner: Spawner | None = None,
    ) -> None:
        super().__init__()
        self.control = control
        self.spawner = spawner
        # Once a spawner went away mid-clone: children to look for after each turn, and
        # until when the loop wakes up for them even with nothing else to do.
        self.sweeping = False
        self.sweep_until = 0.0
        self.backend = backend
        self.registry = registry
        self.identity = identify(os.getpid())
        self.template: RunPlan | None = None
        self.refill = Refill(REFILL_AFTER_MS / 1000)
        # Envelopes named to the server and not yet launched, oldest first (by id).
        self.prepared: dict[str, Envelope] = {}
        # Launched envelopes, until released.
        self.running: set[Envelope] = set()
        # The one envelope still preparing: preparations run one at a time, so the oldest is
        # ready soonest and they never compete.
        self.preparing: Envelope | None = None
        self.server_gone = False
        # What the zygote tells the server, written without ever waiting for it (outbox.py).
        self.outbox = Outbox(control)

    def built(self, envelope: Envelope) -> None:
        if envelope is self.preparing:
            self.preparing = None

    def done(self, envelope: Envelope) -> None:
        super().done(envelope)
        if envelope is self.preparing:
            self.preparing = None
        self.prepared.pop(envelope.run_id, None)
        # A `Ready` not yet written for an envelope that is gone would only be named in a
        # launch that then prepares cold.
        self.outbox.withdraw(envelope.run_id)
        if envelope in self.running:
            self.running.discard(envelope)
            # Its report is sent (`Finished`, `Failed`): the server answers next.
            self.refill.released(time.monotonic())
        elif envelope.failed:
            # A preparation ahead of any request failed on its way (pid 1 said which step,
            # or died): the next waits as long as one that failed at once (`_replenish`).
            # Without this, a step failing for a reason that lasts was retried at once, in a
            # loop, each attempt named to the server.
            self.refill.failed(time.monotonic())

    def serve(self) -> int:
        self.watch(self.control.fileno(), self._on_control)
        if self.spawner is not None:
            self.watch(self.spawner.pidfd, self._on_spawner_exit)
        while not self.server_gone or self.running:
            idle = self.template is None or self.server_gone
            timers = () if idle else self.refill.timers()
            self.turn(timers + self._sweep_timer())
            if self.sweeping:
                self._sweep()
            if not self.server_gone:
                self._replenish()
        return 0

    # -- the spawner ---------------------------------------------------------------------

    def _on_spawner_exit(self) -> None:
        """The spawner is gone: pid 1s are cloned here from now on (spawner.py)."""
        spawner = self.spawner
        assert spawner is not None
        self.unwatch(spawner.pidfd)
        spawner.reap()
        self.spawner = None
        if spawner.orphans:
            self.sweeping = True
            self.sweep_until = time.monotonic() + _SWEEP_S

    def _sweep_timer(self) -> tuple[float, ...]:
        return (time.monotonic() + _SWEEP_EVERY_S,) if self.sweeping else ()

    def _sweep(self) -> None:
        """Look for the one pid 1 a spawner may have left, until it is reaped or time is up."""
        # One request is in flight at a time, so at most one pid 1 was left untold.
        if sweep(self._children()) or time.monotonic() >= self.sweep_until:
            self.sweeping = False

    def _children(self) -> set[int]:
        """Every child whose exit is collected elsewhere: pid 1s known, the spawner."""
        known = {e.held.init_pid for e in self.envelopes if e.held.init_pid is not None}
        if self.spawner is not None:
            known.add(self.spawner.pid)
        return known

    # -- the server's messages ----------------------------------------------------------

    def _on_control(self) -> None:
        try:
            received = recv_message(self.control, max_fds=LAUNCH_FDS, codec=MARSHAL)
        except (OSError, EOFError, ValueError) as exc:
            # A frame that is not a message is refused whole (its descriptors closed), and
            # nothing it asked for runs: as if the server went away, which it must have.
            trace.mark(f"zygote: control channel lost: {type(exc).__name__}: {exc}")
            received = None
        if received is None:
            self._server_gone()
            return
        message, fds = received
        if isinstance(message, Warm):
            for fd in fds:
                os.close(fd)
            # The server forgot every prepared envelope it was told of before sending this:
            # ours would never be launched (and would keep the pool from refilling).
            self._drop_prepared()
            self.template = message.plan
            _stage(message.plan)
            pool = max(0, min(message.pool, _MAX_POOL))
            self.refill.warmed(pool, max(0.0, message.refill_after_ms / 1000))
        elif isinstance(message, Answered):
            for fd in fds:
                os.close(fd)
            # Late (its refill already went ahead): harmless, nothing is held back.
            self.refill.answered(time.monotonic())
            trace.mark("zygote: answered")
        elif isinstance(message, Launch) and len(fds) in (LAUNCH_FDS - 1, LAUNCH_FDS):
            self._launch(message, fds)
        else:
            for fd in fds:
                os.close(fd)

    def _server_gone(self) -> None:
        """The server went away: nothing prepared will be launched; running runs finish."""
        self.server_gone = True
        self.outbox.clear()
        self.unwatch(self.control.fileno())
        self._drop_prepared()

    def _tell(self, envelope_id: str, ready: Ready) -> None:
        """Name a prepared envelope to the server, without waiting for it to read."""
        self.outbox.put(envelope_id, frame(ready, codec=MARSHAL))
        self._flush()

    def _flush(self) -> None:
        try:
            left = self.outbox.flush()
        except OSError:
            # The server is gone; the loop sees the EOF next.
            self.outbox.clear()
            left = False
        self.want_writable(self.control.fileno(), self._flush if left else None)

    def _launch(self, launch: Launch, fds: list[int]) -> None:
        self.refill.launched(time.monotonic())
        envelope = self.prepared.pop(launch.run_id, None)
        if envelope is not None and envelope.shape != shape(launch.plan):
            # Prepared for another shape (a Warm raced the launch): made anew below.
            self._discard(envelope)
            envelope = None
        if envelope is None:
            trace.mark("zygote: launch prepared cold")
            _stage(launch.plan)
            self._retemplate(launch.plan)
            envelope = Envelope(self, self.backend, self.registry, launch.run_id)
            self.envelopes.add(envelope)
        self.running.add(envelope)
        envelope.take(launch, fds)

    def _retemplate(self, plan: RunPlan) -> None:
        if self.template is None or shape(self.template) != shape(plan):
            self.template = plan
            # Envelopes prepared for another shape would only be re-prepared on launch.
            self._drop_prepared()

    def _drop_prepared(self) -> None:
        for envelope in list(self.prepared.values()):
            self._discard(envelope)
        self.prepared.clear()
        if self.preparing is not None and self.preparing not in self.running:
            self._discard(self.preparing)
        self.preparing = None

    def _discard(self, envelope: Envelope) -> None:
        if envelope is self.preparing:
            self.preparing = None
        self.prepared.pop(envelope.run_id, None)
        envelope.teardown()

    def _replenish(self) -> None:
        # When, is refill.py's policy; preparations run one at a time.
        if self.template is None or self.preparing is not None:
            return
        starting = any(envelope.state in _STARTING for envelope in self.running)
        if not self.refill.wanted(
            time.monotonic(),
            ready=len(self.prepared),
            running=len(self.running),
            starting=starting,
        ):
            return
        # Named here, so that the server knows which job serves a launch before sending it,
        # and records it with the request's row in the same commit.
        envelope = Envelope(self, self.backend, self.registry, os.urandom(8).hex())
        self.envelopes.add(envelope)
        try:
            envelope.prepare(self.template)
        except StepError:
            # Not the zygote's to answer: a launch prepares cold and reports what fails then.
            envelope.teardown()
            self.refill.failed(time.monotonic())
            return
        self.preparing = envelope
        self.prepared[envelope.run_id] = envelope
        job = envelope.held.job
        assert job is not None
        ready = Ready(envelope_id=envelope.run_id, supervisor=self.identity, cgroup_paths=job.paths)
        self._tell(envelope.run_id, ready)
        trace.mark("zygote: ready sent")

    def close(self) -> None:
        """Tear down every envelope still here (the zygote is exiting), and the spawner."""
        for envelope in list(self.envelopes):
            envelope.teardown()
        if self.spawner is not None:
            self.unwatch(self.spawner.pidfd)
            self.spawner.reap()
            self.spawner = None
        super().close()


def _stage(plan: RunPlan) -> None:
    # A failure is not the zygote's to answer: each envelope that needs the copy fails closed
    # with its reason (`staging.source_of`).
    with contextlib.suppress(staging.StagingError):
        staging.stage(plan.binds)


def return_free_heap(libc: object) -> None:
    """Give the heap's free pages back (glibc's `malloc_trim`; elsewhere they stay).

    The start leaves ~0.4 MB of freed heap (the codec's compiled readers, the staging's
    reads): returned before the spawner is forked, no clone of this image maps them, and
    each clone has those page-table entries fewer to copy and to tear down at its exit.
    """
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim(0)


def _reason(exc: Exception) -> str:
    """What a failed start says to the user: the step and the kernel's words, as OSError
    carries them (no "[Errno 28]", no class name); another exception's class names the bug."""
    if isinstance(exc, OSError):
        if exc.strerror is None:
            return str(exc)
        return exc.strerror + (f": {exc.filename}" if exc.filename else "")
    return f"{type(exc).__name__}: {exc}"


def main(argv: list[str]) -> int:
    """Serve launches on the socket whose fd is `argv[0]` until EOF."""
    control = socket.socket(fileno=int(argv[0]))
    control.set_inheritable(False)
    # Every mode the envelope sets (its root's 0755 directories, the staged runtime's) is
    # meant as written, whatever umask the server got (systemd's UMask=0077 hid the runtime
    # from the candidate's uid); pid 1 and the candidate inherit it too.
    os.umask(0o022)
    sc.set_name("jigcmd-zygote")
    # Every pid 1 is reaped by the loop (`wait4`), so SIGCHLD keeps its default; pid 1 made
    # without clone3 is reparented here when its middle process exits.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sc.prctl(_PR_SET_CHILD_SUBREAPER, 1)
    try:
        # First, so that pyroute2's import in the child overlaps the rest of the start.
        encoding = netns.LoopbackEncoding()
        # argv: control fd, the cgroup base the server resolved (delegation.py), the state
        # directory or "", the staging mount point and the binds to stage before any plan
        # (staging.py; zygotes sharing a state directory share one copy, runtimeshare.py).
        if len(argv) > 3:
            binds = _BINDS.loads(bytes.fromhex(argv[4])) if len(argv) > 4 else ()
            holders = os.path.join(argv[2], runtimeshare.HOLDERS) if argv[2] else None
            staging.enter(argv[3], binds, holders)
        backend = cgroups.detect(base=argv[1] if len(argv) > 1 else "jigcmd")
        problems = backend.problems()
        if problems:
            raise OSError("cgroups: " + "; ".join(problems))
        seccomp.build_filter()
        privileges.prepare()
        netns.use_request(encoding.result())
    except Exception as exc:  # reported to the server, which fails every launch with it
        control.sendall(b"F" + _reason(exc).encode("utf-8", "replace"))
        return 1
    registry = None
    server = identify(os.getppid())
    if len(argv) > 2 and argv[2] and server is not None:
        registry = Registry(state_dir=argv[2], owner=server)
    # Every pid 1 is a clone of this process. Frozen objects are never scanned by the
    # collector, so its passes do not touch (and copy) every page a child shares with us;
    # pid 1 is short-lived and collects nothing, and the loop allocates little.
    gc.collect()
    gc.freeze()
    gc.disable()
    return_free_heap(sc.libc)
    # Forked now, with the image complete: every pid 1 is a clone of the spawner's image
    # from here on, and the zygote's pages are shared with the spawner alone (spawner.py).
    spawner = Spawner.start()
    if registry is not None:
        registry.hold_liveness()
    control.sendall(b"R")
    zygote = _Zygote(control, backend, registry, spawner)
    try:
        return zygote.serve()
    finally:
        zygote.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
