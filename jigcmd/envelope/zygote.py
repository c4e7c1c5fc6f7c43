"""The zygote: a pre-started, single-threaded fork server that keeps envelopes prepared.

Why a separate process: the anyio server is multi-threaded (worker threads), and forking a
multithreaded Python then running Python before exec can deadlock; starting a fresh
interpreter per run costs ~30 ms. The zygote is started once with a minimal environment (so
the memory image every supervisor, init and candidate is forked from holds no credentials),
imports everything a run needs up front, and forks one supervisor per envelope.

It keeps supervisors whose envelopes are already prepared for the last plan shape it saw (a
`Warm` hint) and hands each one's socket to the server (`Ready`), which sends its `Launch`
straight there: no hop through the zygote on a request's path. A launched supervisor says
so on its socket ("L"); when it has released its envelope and exited, the socket closes.
A `Launch` sent to the zygote itself (the server had none at hand) gets a fresh supervisor,
prepared cold. Every envelope serves one request and is then destroyed.

Preparing costs CPU (~15 ms over four processes), and done while a candidate runs it slowed
that run by several ms on two cores. So the pool is topped up to `pool` only while no run is
in flight; while runs are in flight it keeps just one ready, so that the next launch still
never waits for a preparation. Preparations run one at a time (a supervisor says "P" when
its envelope is ready): the oldest, which the next launch goes to, is ready soonest.

Run as `python -m jigcmd.envelope.zygote FD` where FD is a connected unix stream socket.
When the server goes away (EOF) the zygote exits; prepared supervisors see their sockets
close and tear their envelopes down; running ones fence their own runs.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import os
import secrets
import select
import signal
import socket
import sys

import msgspec

from jigcmd import trace
from jigcmd.envelope import cgroups, ledger, netns, privileges, seccomp, staging
from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.ledger import Registry
from jigcmd.envelope.lifecycle import supervise
from jigcmd.envelope.messages import Launch, Ready, Warm, recv_message, send_message
from jigcmd.journal.identity import identify
from jigcmd.plan import Bind, RunPlan

__all__ = ["main"]

# How long the zygote waits for a dead prepared supervisor's envelope to empty after a kill.
_ORPHAN_EMPTY_S = 0.5

# stdin, stdout, stderr, gate, run socket, and the slot lock when the run reserved one.
_FDS_PER_LAUNCH = 6
_MAX_POOL = 16


class _Zygote:
    def __init__(
        self,
        control: socket.socket,
        backend: cgroups.CgroupBackend,
        registry: Registry | None,
    ) -> None:
        self.control = control
        self.backend = backend
        self.registry = registry
        self.template: RunPlan | None = None
        self.pool_size = 0
        # Prepared supervisors, each also handed to the server (`Ready`); the server
        # launches them directly, and they say "L" here when a launch reached them.
        self.prepared: collections.deque[socket.socket] = collections.deque()
        # Sockets of launched supervisors; each closes when its envelope is released.
        self.running: list[socket.socket] = []
        # The one supervisor still preparing its envelope ("P" when done): preparations
        # run one at a time, so the oldest is ready soonest and they never compete.
        self.preparing: socket.socket | None = None
        # The cgroup job of each prepared supervisor, to release if the supervisor dies.
        self.jobs: dict[socket.socket, str] = {}

    def serve(self) -> int:
        while True:
            ready, _, _ = select.select([self.control, *self.prepared, *self.running], [], [])
            for sock in ready:
                if sock is not self.control:
                    self._heard(sock)
            if self.control not in ready:
                self._replenish()
                continue
            try:
                received = recv_message(self.control, max_fds=_FDS_PER_LAUNCH)
            except (OSError, EOFError, ValueError):
                return 1
            if received is None:
                return 0
            message, fds = received
            if isinstance(message, Warm):
                for fd in fds:
                    os.close(fd)
                # The server dropped every prepared supervisor it held before sending this:
                # ours would never be launched (and would keep the pool from refilling).
                self._drop_prepared()
                self.template = message.plan
                _stage(message.plan)
                self.pool_size = max(0, min(message.pool, _MAX_POOL))
                self._replenish()
            elif isinstance(message, Launch) and len(fds) in (_FDS_PER_LAUNCH - 1, _FDS_PER_LAUNCH):
                self._launch(message, fds)
            else:
                for fd in fds:
                    os.close(fd)

    def _heard(self, sock: socket.socket) -> None:
        """A supervisor's socket turned readable: it was launched, or it is gone."""
        try:
            data = sock.recv(16)
        except OSError:
            data = b""
        if sock is self.preparing and (not data or b"P" in data or b"L" in data):
            self.preparing = None
        if b"L" in data and sock in self.prepared:
            # The server's launch reached it: from now on it runs.
            self.prepared.remove(sock)
            self.jobs.pop(sock, None)
            self.running.append(sock)
            trace.mark("zygote: launched by the server")
            return
        if data:
            return
        # EOF: a running envelope was released, or a prepared supervisor died.
        if sock in self.prepared:
            self.prepared.remove(sock)
            job = self.jobs.pop(sock, None)
            if job is not None:
                self._release_orphan(job)
        if sock in self.running:
            self.running.remove(sock)
        sock.close()

    def _release_orphan(self, name: str) -> None:
        """A prepared supervisor died: its envelope is ours, unused; kill it and remove it.

        Otherwise its job and registry entry would wait for the next recovery. What cannot be
        confirmed here (a job that does not empty in time) is left to recovery as before.
        """
        try:
            job = self.backend.open(name)
            if job is not None:
                job.kill()
                if not job.wait_empty(_ORPHAN_EMPTY_S):
                    return
                job.remove()
        except OSError:
            return
        if self.registry is not None:
            ledger.forget(self.registry.state_dir, name)

    def _retemplate(self, plan: RunPlan) -> None:
        _stage(plan)
        shape = (plan.profile, plan.binds, plan.limits)
        if self.template is None or shape != (
            self.template.profile,
            self.template.binds,
            self.template.limits,
        ):
            self.template = plan
            # Envelopes prepared for another shape would only be re-prepared on launch.
            self._drop_prepared()

    def _drop_prepared(self) -> None:
        # Closing our end (the server closed or never used its copy) makes each of them
        # tear its envelope down.
        while self.prepared:
            self.prepared.popleft().close()
        self.jobs.clear()
        self.preparing = None

    def _launch(self, launch: Launch, fds: list[int]) -> None:
        """A launch through the zygote: the server had no prepared supervisor at hand."""
        trace.mark("zygote: launch")
        self._retemplate(launch.plan)
        try:
            supervisor, _pid = self._fork(None)
            try:
                send_message(supervisor, launch, fds)
            except OSError:
                # The fresh supervisor died at once: the launch's run socket closes with
                # these descriptors, and the server reports the envelope incomplete.
                supervisor.close()
            else:
                self.running.append(supervisor)
        finally:
            for fd in fds:
                os.close(fd)
        trace.mark("zygote: forwarded")
        self._replenish()

    def _replenish(self) -> None:
        # While a run is in flight, one ready envelope is enough (see the module docstring).
        target = min(self.pool_size, 1) if self.running else self.pool_size
        if self.template is not None and self.preparing is None and len(self.prepared) < target:
            # Named here, so that the server knows which job serves a launch before sending
            # it, and records it with the request's row in the same commit.
            envelope_id = secrets.token_hex(8)
            supervisor, pid = self._fork(self.template, envelope_id)
            self.prepared.append(supervisor)
            self.jobs[supervisor] = f"jigcmd-{envelope_id}"
            self.preparing = supervisor
            ready = Ready(
                envelope_id=envelope_id,
                supervisor=identify(pid),
                cgroup_paths=self.backend.job_paths(f"jigcmd-{envelope_id}"),
            )
            try:
                send_message(self.control, ready, [supervisor.fileno()])
            except OSError:
                return  # the server is gone; serve() sees the EOF next
            trace.mark("zygote: ready sent")

    def _fork(
        self, template: RunPlan | None, envelope_id: str | None = None
    ) -> tuple[socket.socket, int]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            ours.close()
            self.control.close()
            for other in (*self.prepared, *self.running):
                other.close()
            supervise(theirs, self.backend, template, self.registry, envelope_id)
        theirs.close()
        return ours, pid


def _stage(plan: RunPlan) -> None:
    # A failure is not the zygote's to answer: each envelope that needs the copy fails closed
    # with its reason (`staging.source_of`).
    with contextlib.suppress(staging.StagingError):
        staging.stage(plan.binds)


def main(argv: list[str]) -> int:
    """Serve launches on the socket whose fd is `argv[0]` until EOF."""
    control = socket.socket(fileno=int(argv[0]))
    control.set_inheritable(False)
    sc.set_name("jigcmd-zygote")
    # Supervisors are reaped automatically; each supervisor resets this for its own children.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        # First, so that pyroute2's import in the child overlaps the rest of the start.
        encoding = netns.LoopbackEncoding()
        # argv: control fd, the cgroup base the server resolved (delegation.py), the state
        # directory or "", the staging mount point and the binds to stage before any plan
        # (staging.py).
        if len(argv) > 3:
            staging.enter(argv[3])
        if len(argv) > 4:
            with contextlib.suppress(staging.StagingError):
                staging.stage(msgspec.msgpack.decode(bytes.fromhex(argv[4]), type=tuple[Bind, ...]))
        backend = cgroups.detect(base=argv[1] if len(argv) > 1 else "jigcmd")
        problems = backend.problems()
        if problems:
            raise OSError("cgroups: " + "; ".join(problems))
        seccomp.build_filter()
        privileges.prepare()
        netns.use_request(encoding.result())
    except Exception as exc:  # reported to the server, which fails every launch with it
        control.sendall(b"F" + f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"))
        return 1
    registry = None
    server = identify(os.getppid())
    if len(argv) > 2 and argv[2] and server is not None:
        registry = Registry(state_dir=argv[2], owner=server)
    # Every supervisor, init and candidate is a fork of this process. Frozen objects are never
    # scanned by the collector, so its passes do not touch (and copy) every page a child
    # shares with us; the children are short-lived and collect nothing.
    gc.collect()
    gc.freeze()
    gc.disable()
    control.sendall(b"R")
    zygote = _Zygote(control, backend, registry)
    try:
        return zygote.serve()
    finally:
        for supervisor in (*zygote.prepared, *zygote.running):
            with contextlib.suppress(OSError):
                supervisor.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
