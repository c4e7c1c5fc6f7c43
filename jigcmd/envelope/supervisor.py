"""One envelope's supervisor: prepares the envelope ahead of time, runs one plan in it, cleans up.

Process shape (each arrow is a fork; no exec until the candidate's own):

    supervisor  (host root; child subreaper; owns the cgroup, the deadline and cleanup)
      └─ init, pid 1: clone3 into new user/mnt/pid/ipc/uts namespaces (and the fresh netns
         the supervisor entered for it), born in the job's cgroup2 directory; joins the v1
         hierarchies, makes its cgroup namespace, builds the root, reaps
           └─ candidate (drops every privilege, waits for "go" and the gate, execs Bun)

Everything that does not depend on the request happens in `prepare`, before any request
exists: the cgroup is created and joined, the namespaces made, the root built and pivoted
into, and the candidate process forked and stripped of every privilege. A request then only
costs `go`: init writes the candidate files, seals `/work` read-only, and hands the
candidate its argv, environment and stdio; it execs once the server opens the gate. Each
envelope serves exactly one request. (An "entrant" process used to sit between supervisor
and init, to unshare and fork pid 1; clone3 makes pid 1 directly, one Python fork less.)

The supervisor is a separate process from the server and outlives it: losing the run
socket counts as a cancel, so the tree is fenced and released either way. Init watches the
supervisor in turn (its control socket closes when the supervisor dies) and exits, which
makes the kernel kill everything in the pid namespace: nothing outlives its keeper.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import secrets
import select
import signal
import socket
import sqlite3
import time
from pathlib import Path
from typing import NoReturn

from jigcmd import trace
from jigcmd.envelope import cgroups, idmap, netns, privileges, rootfs, seccomp, staging
from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.wire import (
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
from jigcmd.evidence import StopReason
from jigcmd.journal import identity
from jigcmd.journal.envelopes import EnvelopeEntry, EnvelopeRegistry
from jigcmd.journal.identity import ProcessIdentity
from jigcmd.journal.store import Journal, JournalError
from jigcmd.plan import RunPlan

__all__ = ["OOM_SCORE_PINNED", "supervise"]

_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_DUMPABLE = 4
# What pid 1 is cloned into. The network namespace comes from the supervisor as root (or
# with these, rootless); the cgroup namespace is made by pid 1 after it joined the job.
_NAMESPACES = (
    sc.CLONE_NEWUSER | sc.CLONE_NEWNS | sc.CLONE_NEWPID | sc.CLONE_NEWIPC | sc.CLONE_NEWUTS
)
_EMPTY_WAIT = 2.0
_SETUP_GRACE = 5.0
# How long a pid 1 that is exiting by itself may take before it is killed like the rest.
_SETTLE_S = 1.0
# stdin, stdout, stderr, gate, run socket, and the slot lock when the run reserved one.
_LAUNCH_FDS = 6
# What travels on to the candidate: stdin, stdout, stderr and the gate.
_HANDED_FDS = 4
# Decided once, in the zygote, as host identity: inside the namespace everyone is uid 0.
_ROOTLESS = idmap.rootless()
# The candidate's OOM score adjustment: the highest, so a memory bomb kills the candidate
# and never pid 1 or anything of the host's.
_OOM_SCORE_ADJ = "1000"
_CAP_SYS_RESOURCE = 24
# Whether the supervisor can pin it (see `_pin_oom_score`). Root without CAP_SYS_RESOURCE
# exists: some VMs' and containers' bounding sets lack it (Docker's default does).
OOM_SCORE_PINNED = not _ROOTLESS and privileges.effective_capability(_CAP_SYS_RESOURCE)


# stdin, stdout, stderr and the gate, in that order.
Handed = tuple[int, int, int, int]


class _StepError(Exception):
    def __init__(self, step: str, error: BaseException | str) -> None:
        super().__init__(f"{step}: {error}")
        self.step = step
        self.error = error.strerror or str(error) if isinstance(error, OSError) else str(error)


def _shape(plan: RunPlan) -> tuple[object, ...]:
    """What a prepared envelope fixes: everything but the request's own data."""
    return (plan.profile, plan.binds, plan.limits)


def supervise(
    zygote: socket.socket,
    backend: cgroups.CgroupBackend,
    template: RunPlan | None,
    registry: Registry | None = None,
    envelope_id: str | None = None,
) -> NoReturn:
    """Prepare an envelope for `template`, then run the one `Launch` that arrives; never returns.

    `envelope_id` names the prepared envelope (its cgroup job is `jigcmd-<id>`); the server
    sends the launch with that id as its run id.
    """
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    sc.prctl(_PR_SET_CHILD_SUBREAPER, 1)
    envelope = _Envelope(backend)
    # Kept open to the end: the zygote sees it close when this envelope is released (and
    # only then tops its pool up). No process of the envelope inherits it.
    envelope.inherited = [zygote.fileno()]
    code = 0
    try:
        if registry is not None:
            # The envelope registers itself the moment it exists (see journal/envelopes.py).
            envelope.registry = EnvelopeRegistry(Path(registry.state_dir))
            envelope.owner = registry.owner
        if template is not None:
            try:
                envelope.prepare(template, envelope_id)
            except _StepError:
                # Not fatal yet: the launch re-prepares cold and reports what fails then.
                envelope.teardown()
            # The zygote prepares one envelope at a time: this one is done.
            with contextlib.suppress(OSError):
                zygote.send(b"P", socket.MSG_NOSIGNAL)
        # Where this process blocks until a request: the CPU of its next marks is the run's.
        trace.mark("supervisor: waiting")
        try:
            received = recv_message(zygote, max_fds=_LAUNCH_FDS)
        except (OSError, EOFError, ValueError):
            received = None
        if received is not None:
            # Tell the zygote this envelope is taken (it counts prepared and running ones).
            with contextlib.suppress(OSError):
                zygote.send(b"L", socket.MSG_NOSIGNAL)
        launch = received[0] if received is not None else None
        fds = received[1] if received is not None else []
        if isinstance(launch, Launch) and len(fds) in (_LAUNCH_FDS - 1, _LAUNCH_FDS):
            run_sock = socket.socket(fileno=fds[4])
            # fds[5], the envelope slot's lock, is held until the envelope is released
            # (or this process dies), whatever happens to the server.
            envelope.slot_fd = fds[5] if len(fds) == _LAUNCH_FDS else -1
            envelope.run(launch, (fds[0], fds[1], fds[2], fds[3]), run_sock)
        else:
            # The zygote (and so the server) went away before a request came.
            for fd in fds:
                os.close(fd)
            envelope.teardown()
    except BaseException:
        code = 1
        with contextlib.suppress(BaseException):
            envelope.teardown()
    os._exit(code)


class _Envelope:
    def __init__(self, backend: cgroups.CgroupBackend) -> None:
        self.backend = backend
        self.job: cgroups.CgroupJob | None = None
        self.netns: str | None = None
        self.init_pid: int | None = None
        self.shape: tuple[object, ...] | None = None
        self.control: socket.socket | None = None
        self.status_r = -1
        self.buffer = b""
        self.cpu_at_go: int | None = None
        # The fence found pid 1 reaped and the cgroup empty (see `_fence`).
        self.confirmed_empty = False
        self.run_id = ""
        self.registry: EnvelopeRegistry | None = None
        self.owner: ProcessIdentity | None = None
        self.registered: str | None = None
        self.slot_fd = -1
        # Pid 1's namespaces, held until after the answer (see `_hold_namespaces`).
        self.namespaces: list[int] = []
        # Descriptors of the supervisor itself that its children close at once.
        self.inherited: list[int] = []

    # -- prepare -----------------------------------------------------------------------

    def prepare(self, plan: RunPlan, run_id: str | None = None) -> None:
        """Build the whole envelope for plans shaped like `plan`; the candidate waits for go."""
        self.run_id = run_id or secrets.token_hex(8)
        name = f"jigcmd-{self.run_id}"
        if self.registry is not None and self.owner is not None:
            # Registered before it exists: if this process dies from here on, recovery
            # knows the cgroup job to fence and remove.
            try:
                self.registry.register(
                    EnvelopeEntry(name=name, supervisor=identity.current(), owner=self.owner)
                )
            except OSError as exc:
                raise _StepError("envelope registry", exc) from exc
            self.registered = name
        try:
            self.job = self.backend.create(name, plan.limits)
        except (OSError, ValueError) as exc:
            raise _StepError("cgroup", exc) from exc
        control, init_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.control = control
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        go_r, go_w = os.pipe2(os.O_CLOEXEC)
        self.status_r = status_r
        init, born_in = _spawn_init(self.job)
        if init == 0:
            control.close()
            os.close(status_r)
            os.close(go_w)
            for fd in self.inherited:
                os.close(fd)
            _Init(plan, init_end, status_w, self.job.memory_view()[1]).start(
                self.job, born_in, go_r
            )
        self.init_pid = init
        init_end.close()
        os.close(status_w)
        os.close(go_r)
        try:
            deadline = time.monotonic() + _SETUP_GRACE
            self._expect("unshared", deadline)
            self.netns = f"net:[{os.stat(f'/proc/{init}/ns/net').st_ino}]"
            self.namespaces = _hold_namespaces(init)
            _write_id_maps(init)
            os.write(go_w, b"g")
            self._expect("prepared", deadline)
        finally:
            os.close(go_w)
        if OOM_SCORE_PINNED:
            _pin_oom_score(init)
        # "prepared" means every process of the envelope is blocked until the go: what the
        # cgroup has used so far is the preparation's, not the run's. Read it now, off the
        # request's path (the first read of cpu.stat after idle flushes per-CPU counters,
        # ~0.3 ms here).
        with contextlib.suppress(OSError):
            self.cpu_at_go = self.job.stats().cpu_usage_ns
        self.shape = _shape(plan)

    # -- run ---------------------------------------------------------------------------

    def run(self, launch: Launch, stdio: Handed, sock: socket.socket) -> None:
        """Run the launch's plan in the prepared envelope (prepared now if need be); clean up."""
        plan = launch.plan
        launched = time.monotonic()
        trace.mark("supervisor: launch")
        owner: Owner | None = None
        try:
            owner = Owner.of(launch)
            if _peer_gone(sock):
                # The server died after sending this launch (it sat in a queue): start
                # nothing and claim nothing; recovery closes the row as uncertain.
                raise _Abandoned
            if self.shape != _shape(plan) or self.job is None:
                self.teardown()
                if time.monotonic() >= plan.deadline:
                    raise _StepError("deadline", "deadline passed before setup")
                # Prepared cold, with the run's descriptors open: none may leak into the
                # envelope's processes (a stdout copy in pid 1 would delay the output's EOF).
                self.inherited += [*stdio, sock.fileno()]
                if self.slot_fd >= 0:
                    self.inherited.append(self.slot_fd)
                self.prepare(plan, launch.run_id)
                if _peer_gone(sock):
                    raise _StepError("server", "the server went away before the candidate ran")
            trace.mark("supervisor: ready to go")
            self._go(plan, stdio)
            trace.mark("supervisor: candidate exec'd")
        except _Abandoned:
            for fd in stdio:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.teardown()
            return
        except _StepError as exc:
            for fd in stdio:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fence()
            ok, problems = self._release()
            self._free_slot()
            if owner is not None and exc.step == "server":
                owner.lost(ok, problems)
            _send(
                sock,
                Failed(
                    step=exc.step, error=exc.error, cleanup_complete=ok, cleanup_problems=problems
                ),
            )
            self.let_go_of_namespaces()
            return
        assert self.job is not None and self.init_pid is not None
        started = time.monotonic()
        _send(
            sock,
            Started(
                supervisor_pid=os.getpid(),
                init_pid=self.init_pid,
                cgroup_paths=self.job.paths,
                netns=self.netns or "",
                setup_ms=(started - launched) * 1000,
            ),
        )
        try:
            exit_code, sig, reason, server_lost = self._wait(plan.deadline, sock)
        except _InitLost:
            # Nobody cancelled and nothing proves how the candidate ended: no evidence, no
            # signal is invented. Fenced and released; the server records it uncertain.
            self._fence()
            ok, problems = self._release()
            self._free_slot()
            _send(
                sock,
                Failed(
                    step=INIT_LOST,
                    error="pid 1 of the envelope died without reporting how the candidate "
                    "ended (killed from outside); the candidate ran, its outcome is unknown",
                    cleanup_complete=ok,
                    cleanup_problems=problems,
                ),
            )
            self.let_go_of_namespaces()
            return
        wall_ms = (time.monotonic() - started) * 1000
        trace.mark("supervisor: candidate ended")
        if not server_lost:
            # The server completes the output and records it while the cleanup runs; the
            # answer still waits for `Finished`.
            _send(sock, Ended(exit_code=exit_code, signal=sig, stop_reason=reason))
        stats: cgroups.CgroupStats | None = None
        if reason == "exited":
            # Pid 1 reports only after it has SIGKILLed the rest of its namespace: the
            # accounting is final but for pid 1's own exit. Read it while pid 1 exits (the
            # first read after a run flushes per-CPU counters, ~0.4 ms here).
            stats = self.job.stats()
            # Pid 1 exits with its candidate, and the kernel kills whatever is left in the
            # pid namespace: wait for that before reaching for the kill switches (a cgroup.kill
            # while the namespace is dying was measured at ~12 ms here).
            self._settle()
        self._fence()
        trace.mark("supervisor: fenced")
        if stats is None:
            stats = self.job.stats()
        ok, problems = self._release()
        # The slot is free before the answer leaves: a caller that got its answer finds
        # the slot free, never "all slots in use" from a run that is already over.
        self._free_slot()
        trace.mark("supervisor: released")
        if server_lost and owner is not None:
            # Nobody will record this run's outcome: the server is gone, and with it the
            # output. Record what is proved: fenced, cleanup as confirmed, no result.
            owner.lost(ok, problems)
        cpu_ms = None
        if stats.cpu_usage_ns is not None:
            cpu_ms = (stats.cpu_usage_ns - (self.cpu_at_go or 0)) / 1e6
        delivered = _send(
            sock,
            Finished(
                exit_code=exit_code,
                signal=sig,
                stop_reason=reason,
                wall_ms=wall_ms,
                cpu_ms=cpu_ms,
                peak_memory_bytes=stats.peak_memory_bytes,
                oom_killed=stats.oom_killed,
                pids_limit_hit=stats.pids_limit_hit,
                cleanup_complete=ok,
                cleanup_problems=problems,
            ),
        )
        if not delivered and owner is not None and not server_lost:
            # The server vanished just as the run ended; nobody else can record it.
            owner.lost(ok, problems)
        self.let_go_of_namespaces()

    def _free_slot(self) -> None:
        if self.slot_fd >= 0:
            os.close(self.slot_fd)
            self.slot_fd = -1

    def _go(self, plan: RunPlan, stdio: Handed) -> None:
        assert self.control is not None and self.job is not None
        if plan.cpus:
            try:
                # From the host side, where the host offers a cpuset: the candidate cannot
                # widen it. Pid 1 sets the candidate's affinity mask to the same CPUs in any
                # case (see `_Init.main`).
                self.job.pin(plan.cpus)
            except OSError as exc:
                raise _StepError("cpu pin", exc) from exc
        try:
            send_message(self.control, Go(plan=plan), list(stdio))
        except OSError as exc:
            raise _StepError("start candidate", exc) from exc
        finally:
            for fd in stdio:
                os.close(fd)
        self._expect("ready", min(plan.deadline, time.monotonic() + _SETUP_GRACE))

    def _expect(self, words: str | tuple[str, ...], deadline: float) -> str:
        """The next status line, which must start with one of `words`; a failure raises."""
        expected = (words,) if isinstance(words, str) else words
        line = self._read_line(deadline)
        if line is None:
            raise _StepError("envelope", f"no answer from the envelope while waiting for {words!r}")
        if line.startswith("fail "):
            step, _, error = line[5:].partition("\t")
            raise _StepError(step, error)
        if not line.startswith(expected):
            raise _StepError("envelope", f"unexpected status {line!r} while waiting for {words!r}")
        return line

    def _read_line(self, deadline: float) -> str | None:
        while b"\n" not in self.buffer:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                return None
            ready, _, _ = select.select([self.status_r], [], [], timeout)
            if not ready:
                return None
            data = os.read(self.status_r, 4096)
            if not data:
                return None
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", "replace")

    def _wait(
        self, deadline: float, sock: socket.socket
    ) -> tuple[int | None, str | None, StopReason, bool]:
        """How the candidate ended, and whether the server was lost meanwhile."""
        poller = select.poll()
        poller.register(self.status_r, select.POLLIN)
        poller.register(sock.fileno(), select.POLLIN)
        while True:
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                return (*self._stop("deadline"), False)
            for fd, _events in poller.poll(timeout * 1000):
                if fd == self.status_r:
                    line = self._read_line(time.monotonic() + 1.0)
                    if line is None:
                        # Init died without a word: something outside killed it.
                        raise _InitLost
                    kind, _, value = line.partition(" ")
                    if kind == "exit":
                        return int(value), None, "exited", False
                    if kind == "signal":
                        return None, signal.Signals(int(value)).name, "exited", False
                elif fd == sock.fileno():
                    try:
                        message = recv_message(sock)
                    except (OSError, EOFError, ValueError):
                        message = None
                    if message is None or isinstance(message[0], Cancel):
                        # A cancel, or the server is gone: fence now, never leave it running.
                        return (*self._stop("cancelled"), message is None)

    def _stop(self, reason: StopReason) -> tuple[int | None, str | None, StopReason]:
        self._fence()
        return None, "SIGKILL", reason

    # -- fencing and release -----------------------------------------------------------

    def _settle(self) -> None:
        """Reap pid 1, which is exiting by itself, bounded by a short grace."""
        if self.init_pid is not None and _wait_for(self.init_pid, _SETTLE_S):
            self.init_pid = None

    def _job_populated(self) -> bool:
        assert self.job is not None
        try:
            return self.job.populated()
        except OSError:
            return True

    def _fence(self) -> None:
        """SIGKILL the whole tree: every process in the cgroup, and pid 1 of the namespace."""
        if self.job is not None and self.init_pid is None and not self._job_populated():
            # Pid 1 is reaped and the cgroup is empty: nothing is left to kill, and nothing
            # can enter it any more (its members are gone; a process joins by being forked
            # by one). The release needs no second look.
            self.confirmed_empty = True
            _reap_all()
            return
        if self.job is not None:
            with contextlib.suppress(OSError):
                self.job.kill()
        if self.init_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, signal.SIGKILL)
            # Pid 1 is our child (we are its subreaper): wait for it, so that not even a
            # zombie of the envelope is left when the outcome is reported.
            _wait_for(self.init_pid, _EMPTY_WAIT)
        _reap_all()

    def _release(self) -> tuple[bool, tuple[str, ...]]:
        """Confirm the tree is gone and remove the cgroup (the namespaces go after the answer)."""
        problems: list[str] = []
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.status_r >= 0:
            os.close(self.status_r)
            self.status_r = -1
        if self.job is not None:
            try:
                empty = self.confirmed_empty or self.job.wait_empty(_EMPTY_WAIT)
            except OSError as exc:
                empty = False
                problems.append(f"cgroup state unreadable: {exc}")
            _reap_all()
            if not empty and not problems:
                problems.append("cgroup still populated after kill")
            if not problems:
                try:
                    self.job.remove()
                except OSError as exc:
                    problems.append(f"cgroup not removed: {exc}")
            self.job = None
            self.confirmed_empty = False
        # The network namespace has no name or mount and the scratch is a tmpfs inside the
        # mount namespace: no process is left in either (the empty cgroup above confirms
        # it); they are freed when `let_go_of_namespaces` drops the last reference.
        if self.registered is not None and not problems and self.registry is not None:
            with contextlib.suppress(OSError):
                self.registry.drop(self.registered)
            self.registered = None
        self.init_pid = None
        self.shape = None
        return not problems, tuple(problems)

    def teardown(self) -> None:
        """Fence and release whatever a (partial) preparation built."""
        self._fence()
        self._release()
        self.let_go_of_namespaces()

    def let_go_of_namespaces(self) -> None:
        """Drop the held namespaces: the kernel tears them down now, in this process."""
        for fd in self.namespaces:
            os.close(fd)
        self.namespaces = []


@dataclasses.dataclass(frozen=True)
class Registry:
    """Where envelopes register themselves, and the server they are prepared for."""

    state_dir: str
    owner: ProcessIdentity


class Owner:
    """The journal row a run answers to, for the one case only the supervisor can record.

    The server records every outcome it sees. When the server dies mid-run, the supervisor
    fences the run and closes the row itself (with the cleanup it proved, see `lost`). The
    journal is opened only then: SQLite serialises writers across processes, and nothing
    on a run's path should wait for that lock.
    """

    def __init__(self, state_dir: str, operation_id: str, root_run: str) -> None:
        self.state_dir = state_dir
        self.operation_id = operation_id
        self.root_run = root_run

    @classmethod
    def of(cls, launch: Launch) -> Owner | None:
        """The owner named by `launch`, if it has a journal row."""
        if launch.operation_id is None or launch.state_dir is None:
            return None
        return cls(launch.state_dir, launch.operation_id, launch.root_run)

    def lost(self, cleanup_complete: bool, problems: tuple[str, ...]) -> None:
        """The server went away mid-run: close the row, with the cleanup proved.

        Uncertain, unless the server had recorded the run's evidence before it went and the
        cleanup is proved: then the row is done with that evidence.
        """
        with (
            contextlib.suppress(OSError, JournalError, sqlite3.Error),
            Journal.open(Path(self.state_dir)) as journal,
        ):
            journal.close_lost(
                self.operation_id,
                root_run=self.root_run,
                reason="the server went away during the run; the run was fenced without a "
                "proved result",
                cleanup_complete=cleanup_complete,
                problems="; ".join(problems),
            )


class _InitLost(Exception):
    """Pid 1 died without reporting how the candidate ended."""


class _Abandoned(Exception):
    """The launch arrived after its server was gone: nothing is claimed or started."""


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


def _wait_for(pid: int, timeout: float) -> bool:
    """Reap child `pid`, waiting at most `timeout`; whether it is gone (reaped or not ours).

    Bounded: a SIGKILLed process can sit in D state.
    """
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        pidfd = -1
    try:
        # A pidfd turns readable the moment the process exits: no polling granularity.
        if pidfd >= 0:
            select.select([pidfd], [], [], timeout)
        try:
            reaped, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        return reaped == pid
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def _reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _pin_oom_score(init: int) -> None:
    """Make the armed candidate the OOM killer's first choice, for good.

    Written by the supervisor because only a writer with `CAP_SYS_RESOURCE` over the host
    fixes the value as the process's floor (`oom_score_adj_min`): the candidate's own write
    could be undone by the candidate, down to 0. Its children inherit the floor. At
    "prepared" the candidate is pid 1's only child, blocked until the go.
    """
    try:
        with open(f"/proc/{init}/task/{init}/children", encoding="ascii") as handle:
            children = handle.read().split()
        if len(children) != 1:
            raise OSError(errno.ESRCH, f"pid 1 has {len(children)} children, expected one")
        with open(f"/proc/{children[0]}/oom_score_adj", "w", encoding="ascii") as handle:
            handle.write(_OOM_SCORE_ADJ)
    except OSError as exc:
        raise _StepError("oom score", exc) from exc


def _write_id_maps(pid: int) -> None:
    try:
        idmap.write_id_maps(pid)
    except OSError as exc:
        raise _StepError("user namespace id maps", exc) from exc


def _report(fd: int, text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, text.encode("utf-8", "replace") + b"\n")


def _candidate_failure(exec_r: int) -> tuple[str, str] | None:
    """Read the exec-error pipe to EOF: the step the candidate failed at and why, if it did."""
    error = b""
    while chunk := os.read(exec_r, 4096):
        error += chunk
    if not error:
        return None
    step, _, detail = error.decode("utf-8", "replace").partition("\t")
    return step, detail


def _fail(fd: int, step: str, error: BaseException | str) -> NoReturn:
    message = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    _report(fd, f"fail {step}\t{message}".replace("\n", " "))
    os._exit(1)


def _spawn_init(job: cgroups.CgroupJob) -> tuple[int, str | None]:
    """Create pid 1 in fresh namespaces, born in the job's cgroup2 directory if there is one.

    Returns (its pid, or 0 in pid 1 itself; the cgroup2 directory it was born in or None).
    As host root, the network namespace comes first and is made here, by the supervisor, so
    that the host user namespace owns it: the candidate can never reconfigure it (see
    jigcmd.envelope.netns); the supervisor then returns to the host's. Without root (a
    delegated cgroup subtree, unprivileged user namespaces) pid 1's user namespace owns it:
    pid 1 may configure it, the candidate (no capabilities) may not. The cgroup namespace is
    made by pid 1 once it joined every hierarchy, so that its root is the job.
    """
    flags = _NAMESPACES
    host_net = -1
    if _ROOTLESS:
        flags |= sc.CLONE_NEWNET
    else:
        try:
            # Host root's supplementary group 0 would otherwise survive into the namespace.
            os.setgroups([])
            host_net = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            netns.enter_fresh()
        except OSError as exc:
            if host_net >= 0:
                with contextlib.suppress(OSError):
                    sc.setns(host_net, sc.CLONE_NEWNET)
                os.close(host_net)
            raise _StepError("network namespace", exc) from exc
    birth = job.birth_dir
    try:
        cgroup_fd = -1
        if birth is not None:
            with contextlib.suppress(OSError):
                cgroup_fd = os.open(birth, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            if cgroup_fd >= 0:
                try:
                    return sc.clone(flags, cgroup_fd), birth
                except OSError:
                    pass  # refused (a delegation quirk): pid 1 moves itself, slower
            try:
                return sc.clone(flags), None
            except OSError as exc:
                if exc.errno not in (errno.ENOSYS, errno.EPERM):
                    raise _StepError("create namespaces", exc) from exc
            # clone3 hidden (container seccomp profiles answer ENOSYS or EPERM): the old way.
            try:
                return _fork_after_unshare(flags), None
            except OSError as exc:
                raise _StepError("create namespaces", exc) from exc
        finally:
            if cgroup_fd >= 0:
                os.close(cgroup_fd)
    finally:
        if host_net >= 0:
            if os.getpid() != 1:  # pid 1 (the child) stays in the envelope's namespace
                sc.setns(host_net, sc.CLONE_NEWNET)
            os.close(host_net)


def _hold_namespaces(init: int) -> list[int]:
    """Descriptors of pid 1's namespaces, so that its exit does not tear them down.

    The last reference to a namespace frees it in the exiting process: the mount namespace
    unmounts its tree and waits for an RCU grace period, and pid 1's exit (which the answer
    waits for) took 1.68 ms with all of them against 1.33 ms with them held elsewhere
    (a forked zygote-sized process, 15 tmpfs mounts, median of 12). Holding them moves that
    work after the answer: by then the cgroup is confirmed empty and removed, so no process
    is left in them, only memory (the candidate tree, the scratch), freed when they close.
    """
    held: list[int] = []
    for kind in ("mnt", "net", "ipc", "uts", "pid", "cgroup", "user"):
        with contextlib.suppress(OSError):
            held.append(os.open(f"/proc/{init}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC))
    return held


def _fork_after_unshare(flags: int) -> int:
    """Make pid 1 without clone3: a middle process unshares `flags` and forks it, then exits.

    Returns pid 1's host pid, or 0 in pid 1 itself. Only the first fork after
    unshare(CLONE_NEWPID) lands in the new pid namespace; the middle process reports that
    child's pid and exits, and pid 1 is reparented to the supervisor (its subreaper).
    """
    report_r, report_w = os.pipe2(os.O_CLOEXEC)
    middle = os.fork()
    if middle == 0:
        os.close(report_r)
        try:
            sc.unshare(flags)
            pid = os.fork()
        except BaseException:
            os._exit(1)
        if pid == 0:
            os.close(report_w)
            return 0
        os.write(report_w, str(pid).encode())
        os._exit(0)
    os.close(report_w)
    try:
        reported = os.read(report_r, 32)
    finally:
        os.close(report_r)
        os.waitpid(middle, 0)
    if not reported:
        raise OSError(errno.ECHILD, "the process making pid 1 failed (unshare or fork)")
    return int(reported)


class _Init:
    """Pid 1: builds the root, arms the candidate, then hands it the request and reaps."""

    def __init__(
        self,
        plan: RunPlan,
        control: socket.socket,
        status_w: int,
        memory_limit: str,
    ) -> None:
        self.plan = plan
        self.sources: dict[str, int] = {}
        # The limit the kernel enforces, read back at create time, is what Bun sees.
        self.memory_limit = memory_limit
        self.control = control
        self.status_w = status_w
        self.candidate = -1

    def start(self, job: cgroups.CgroupJob, born_in: str | None, go_r: int) -> NoReturn:
        """Pid 1's first steps, still host uid 0: cgroups, namespaces, bind sources, id maps."""
        step = "join cgroup"
        try:
            # Before any candidate code: nothing of the envelope runs unlimited.
            job.join(born_in)
            step = "cgroup namespace"
            # After the join, so that the namespace's root is the job in every hierarchy.
            sc.unshare(sc.CLONE_NEWCGROUP)
            if _ROOTLESS:
                step = "network namespace"
                netns.loopback_up()
            step = "open bind sources"
            # In the new mount namespace (a bind from a descriptor must name a mount of the
            # caller's namespace) and while still host uid 0 (see rootfs.build_root).
            self.sources = {
                bind.source: os.open(staging.source_of(bind), os.O_PATH | os.O_CLOEXEC)
                for bind in self.plan.binds
            }
            _report(self.status_w, "unshared")
            step = "wait for id maps"
            if os.read(go_r, 1) != b"g":
                _fail(self.status_w, step, "supervisor went away")
            os.close(go_r)
            step = "become namespace root"
            os.setresgid(0, 0, 0)
            os.setresuid(0, 0, 0)
        except BaseException as exc:
            _fail(self.status_w, step, exc)
        self.main()

    def main(self) -> NoReturn:
        step = "init"
        try:
            # /proc/1 must not be readable by the candidate (it holds the zygote's image).
            sc.prctl(_PR_SET_DUMPABLE, 0)
            step = "set hostname"
            socket.sethostname("jigcmd")
            step = "prepare privilege drop"
            privileges.prepare()
            seccomp.build_filter()
            rootfs.build_root(self.plan, self.sources, self.memory_limit)
            for fd in self.sources.values():
                os.close(fd)
            step = "arm candidate"
            candidate_end, init_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            exec_r, exec_w = os.pipe2(os.O_CLOEXEC)
            self.candidate = os.fork()
            if self.candidate == 0:
                self.control.close()
                init_end.close()
                os.close(exec_r)
                _candidate(self.plan, candidate_end, exec_w, self.status_w)
            candidate_end.close()
            os.close(exec_w)
            # "prepared" waits until the candidate is armed (privileges dropped, blocked on the
            # go): from then on nothing of the envelope runs until a request arrives.
            if init_end.recv(1) != b"a":
                failed_step, detail = _candidate_failure(exec_r) or (step, "it exited")
                _fail(self.status_w, failed_step, detail)
            _report(self.status_w, "prepared")
            step = "wait for the request"
            trace.mark("init: waiting")
            received = self._receive_go()
            plan, stdio = received
            trace.mark("init: go")
            step = "cpu pin"
            if plan.cpus:
                _pin_affinity(self.candidate, plan.cpus)
            step = "candidate files"
            if plan.profile == "candidate":
                rootfs.seal_candidate(plan.files)
            step = "start candidate"
            try:
                send_message(init_end, Go(plan=plan), list(stdio))
            finally:
                for fd in stdio:
                    os.close(fd)
                init_end.close()
            failure = _candidate_failure(exec_r)
            os.close(exec_r)
            if failure is not None:
                _fail(self.status_w, *failure)
            _report(self.status_w, "ready")
        except rootfs.RootfsError as exc:
            _fail(self.status_w, f"root filesystem: {exc.step}", str(exc).partition(": ")[2])
        except BaseException as exc:
            _fail(self.status_w, step, exc)
        self._reap()

    def _receive_go(self) -> tuple[RunPlan, Handed]:
        received = recv_message(self.control, max_fds=_HANDED_FDS)
        if received is None:
            # The supervisor is gone; exiting pid 1 kills everything in the namespace.
            os._exit(0)
        message, fds = received
        if not isinstance(message, Go) or len(fds) != _HANDED_FDS:
            raise RuntimeError("malformed go message")
        return message.plan, (fds[0], fds[1], fds[2], fds[3])

    def _reap(self) -> NoReturn:
        # Wake on SIGCHLD through a pipe, and on the supervisor's socket closing.
        wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
        status = None
        while status is None:
            while True:
                # Peek before reaping: while the candidate is a zombie it still "exists"
                # (kill(pid, 0) succeeds), so an orphan polling for its end cannot see it
                # before everything else in the namespace is SIGKILLed.
                try:
                    waitable = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                except ChildProcessError:
                    os._exit(0)
                if waitable is None or waitable.si_pid == 0:
                    break
                if waitable.si_pid == self.candidate:
                    # As pid 1, kill(-1) reaches every other process of this namespace.
                    with contextlib.suppress(OSError):
                        os.kill(-1, signal.SIGKILL)
                    _pid, status = os.waitpid(self.candidate, 0)
                    break
                os.waitpid(waitable.si_pid, 0)
            if status is not None:
                break
            control = self.control.fileno()
            ready, _, _ = select.select([wake_r, control], [], [])
            if control in ready and not self.control.recv(1):
                os._exit(0)
            if wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
        if os.WIFSIGNALED(status):
            _report(self.status_w, f"signal {os.WTERMSIG(status)}")
        else:
            _report(self.status_w, f"exit {os.WEXITSTATUS(status)}")
        # Exiting pid 1 makes the kernel SIGKILL everything left in the namespace: a daemon
        # or a double-forked grandchild does not outlive the candidate's main process.
        os._exit(0)


def _pin_affinity(pid: int, cpus: tuple[int, ...]) -> None:
    """Set `pid`'s affinity mask to `cpus`; raise unless the kernel then reports exactly them.

    Before the candidate execs: the CPU count Bun reads (and sizes its thread pools by) is
    its affinity mask, and without a cpuset this mask is the only pin there is.
    """
    os.sched_setaffinity(pid, cpus)
    granted = os.sched_getaffinity(pid)
    if granted != set(cpus):
        raise OSError(
            errno.EINVAL, f"the candidate is pinned to {sorted(granted)}, not {sorted(cpus)}"
        )


def _candidate(plan: RunPlan, channel: socket.socket, exec_w: int, status_w: int) -> NoReturn:
    step = "arm candidate"
    try:
        os.close(status_w)
        # Fork inherited init's non-dumpable mark, which makes /proc/self unwritable to us;
        # exec would reset it anyway.
        sc.prctl(_PR_SET_DUMPABLE, 1)
        if not OOM_SCORE_PINNED:
            step = "oom score"
            # With CAP_SYS_RESOURCE the supervisor pins the score once the candidate is armed
            # (see `_pin_oom_score`); without it nobody can, so the candidate raises its own:
            # raising needs no privilege, but the candidate could lower it again, down to the
            # floor it inherited (0 unless a privileged writer set one).
            with open("/proc/self/oom_score_adj", "w", encoding="ascii") as handle:
                handle.write(_OOM_SCORE_ADJ)
        step = "reset signals"
        # Python ignores SIGPIPE and SIGXFSZ (and the zygote SIGINT); ignored dispositions
        # survive exec, so the candidate would inherit them. It gets a normal process.
        for signum in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        step = "drop privileges"
        # Everything privileged happens now, before any request exists; what is left for
        # the request (receive fds, dup2, chdir, execve) needs no privilege.
        # Rootless, the user's own supplementary groups cannot be dropped (see privileges).
        kept = frozenset(os.getgroups()) if _ROOTLESS else frozenset()
        privileges.drop_to_candidate(plan.limits.nofile, plan.limits.fsize_bytes, kept)
        step = "wait for the request"
        trace.mark("candidate: waiting")
        channel.sendall(b"a")
        received = recv_message(channel, max_fds=_HANDED_FDS)
        if received is None:
            os._exit(0)
        message, fds = received
        if not isinstance(message, Go) or len(fds) != _HANDED_FDS:
            raise RuntimeError("malformed go message")
        plan = message.plan
        trace.mark("candidate: go")
        step = "withdrawn"
        # Staged: the server opens the gate once its journal row is durable. EOF instead
        # means the launch was withdrawn (a replay, a cancel, the server gone): nothing runs.
        if os.read(fds[3], 1) != b"g":
            raise RuntimeError("the launch was withdrawn before the candidate started")
        # The last mark: from the dup2 on, fd 2 is the candidate's own stderr.
        trace.mark("candidate: gate open")
        step = "candidate stdio"
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        # Everything above 2 closes at exec, the exec-error pipe included: the candidate
        # starts with exactly stdin, stdout and stderr.
        sc.close_range(3, 0xFFFFFFFF, sc.CLOSE_RANGE_CLOEXEC)
        step = "working directory"
        os.chdir(plan.cwd)
        step = "exec runtime"
        os.execve(plan.argv[0], list(plan.argv), dict(plan.env))
    except BaseException as exc:
        message_text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        with contextlib.suppress(OSError):
            os.write(exec_w, f"{step}\t{message_text}".encode("utf-8", "replace"))
        os._exit(127)
