"""One envelope's lifecycle: prepared ahead of time, runs one plan, fenced and released.

Process shape (each arrow is a fork; the candidate is spawned without one):

    supervisor  (host root; child subreaper; owns the cgroup, the deadline and cleanup)
      └─ init, pid 1: clone3 into new user/mnt/pid/ipc/uts namespaces (and the fresh netns
         the supervisor entered for it), born in the job's cgroup2 directory; joins the v1
         hierarchies, makes its cgroup namespace, builds the root (see pid1.py)
           └─ candidate: Bun, posix_spawned by pid 1 after pid 1 dropped its privileges

Everything that does not depend on the request happens in `prepare`, before any request
exists: the cgroup is created and joined, the namespaces made, the root built and pivoted
into. A request then only costs `go`: pid 1 writes the candidate files, seals `/work`
read-only, drops its privileges and spawns Bun once the server opens the gate. Each
envelope serves exactly one request.

The supervisor is a separate process from the server and outlives it: losing the run
socket counts as a cancel, so the tree is fenced and released either way. Pid 1 dies with
the supervisor (`PR_SET_PDEATHSIG`, or its control socket closing before the go), which
makes the kernel kill everything in the pid namespace: nothing outlives its keeper.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import signal
import socket
import time
from typing import NoReturn

from jigcmd import trace
from jigcmd.envelope import cgroups, idmap, ledger, oomscore, pid1, scratchfile, spawning
from jigcmd.envelope import syscalls as sc
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

__all__ = ["supervise"]

_PR_SET_CHILD_SUBREAPER = 36
_EMPTY_WAIT = 2.0
_SETUP_GRACE = 5.0
# How long a pid 1 that is exiting by itself may take before it is killed like the rest.
_SETTLE_S = 1.0
# stdin, stdout, stderr, gate, run socket, and the slot lock when the run reserved one.
_LAUNCH_FDS = 6


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
    sc.set_name("jigcmd-super")
    os.setsid()
    sc.prctl(_PR_SET_CHILD_SUBREAPER, 1)
    envelope = _Envelope(backend)
    # Kept open to the end: the zygote sees it close when this envelope is released (and
    # only then tops its pool up). No process of the envelope inherits it.
    envelope.inherited = [zygote.fileno()]
    code = 0
    try:
        # The envelope registers itself the moment it exists (see journal/envelopes.py).
        envelope.registration = ledger.Registration(registry)
        if template is not None:
            try:
                envelope.prepare(template, envelope_id)
            except StepError:
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
    except BaseException:  # noqa: BLE001 - a forked process: whatever fails, it cleans up and exits
        code = 1
        with contextlib.suppress(BaseException):
            envelope.teardown()
    # Its whole life's CPU, for the trace's account by process (scripts/trace_stages.py).
    trace.mark("supervisor: exit")
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
        self.registration = ledger.Registration(None)
        self.slot_fd = -1
        # Pid 1's own OOM score while it holds the candidate's pinned one (see oomscore.py).
        self.init_oom: bytes | None = None
        # Pid 1's namespaces, held until after the answer (see `spawning.hold_namespaces`).
        self.namespaces: list[int] = []
        # Descriptors of the supervisor itself that its children close at once.
        self.inherited: list[int] = []
        # The root of the envelope's scratch, from pid 1 (see `pid1._hand_over_scratch`).
        self.scratch_fd = -1

    # -- prepare -----------------------------------------------------------------------

    def prepare(self, plan: RunPlan, run_id: str | None = None) -> None:
        """Build the whole envelope for plans shaped like `plan`; the candidate waits for go."""
        self.run_id = run_id or secrets.token_hex(8)
        name = f"jigcmd-{self.run_id}"
        # Registered before it exists: if this process dies from here on, recovery knows
        # the cgroup job to fence and remove.
        try:
            self.registration.register(name)
        except OSError as exc:
            raise StepError("envelope registry", exc) from exc
        try:
            self.job = self.backend.create(name, plan.limits)
        except (OSError, ValueError) as exc:
            raise StepError("cgroup", exc) from exc
        control, init_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.control = control
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        go_r, go_w = os.pipe2(os.O_CLOEXEC)
        self.status_r = status_r
        init, born_in = spawning.spawn_init(self.job)
        if init == 0:
            control.close()
            os.close(status_r)
            os.close(go_w)
            for fd in self.inherited:
                os.close(fd)
            pid1.Init(plan, init_end, status_w, self.job.memory_view()[1]).start(
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
            self.namespaces = spawning.hold_namespaces(init)
            _write_id_maps(init)
            os.write(go_w, b"g")
            self._expect("prepared", deadline)
            self._take_scratch()
        finally:
            os.close(go_w)
        if oomscore.PINNED:
            self._pin_oom_score(init)
        # "prepared" means every process of the envelope is blocked until the go: what the
        # cgroup has used so far is the preparation's, not the run's. Read it now, off the
        # request's path (the first read of cpu.stat after idle flushes per-CPU counters,
        # ~0.3 ms here).
        with contextlib.suppress(OSError):
            self.cpu_at_go = self.job.stats().cpu_usage_ns
        self.shape = _shape(plan)

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

    def _read_scratch(self, plan: RunPlan) -> ScratchRead | None:
        """The plan's scratch file, read once every process of the run is gone."""
        if plan.scratch_file is None:
            return None
        return scratchfile.read_scratch_file(self.scratch_fd, plan.scratch_file)

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
                    raise StepError("deadline", "deadline passed before setup")
                # Prepared cold, with the run's descriptors open: none may leak into the
                # envelope's processes (a stdout copy in pid 1 would delay the output's EOF).
                self.inherited += [*stdio, sock.fileno()]
                if self.slot_fd >= 0:
                    self.inherited.append(self.slot_fd)
                self.prepare(plan, launch.run_id)
                if _peer_gone(sock):
                    raise StepError("server", "the server went away before the candidate ran")
            trace.mark("supervisor: ready to go")
            self._go(plan, stdio)
            trace.mark("supervisor: candidate exec'd")
        except _Abandoned:
            for fd in stdio:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.teardown()
            return
        except StepError as exc:
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
        scratch = self._read_scratch(plan)
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
                scratch_file=scratch,
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
                # widen it. Pid 1 sets the affinity mask the candidate inherits to the same
                # CPUs in any case (see pid1.py).
                self.job.pin(plan.cpus)
            except OSError as exc:
                raise StepError("cpu pin", exc) from exc
        try:
            send_message(self.control, Go(plan=plan), list(stdio))
        except OSError as exc:
            raise StepError("start candidate", exc) from exc
        finally:
            for fd in stdio:
                os.close(fd)
        self._expect("ready", min(plan.deadline, time.monotonic() + _SETUP_GRACE))
        if self.init_oom is not None:
            # The candidate inherited the pinned score at its spawn; pid 1 goes back to its
            # own. Not fatal: the candidate runs, and a pid 1 left at 1000 only risks being
            # the one an OOM kills (an uncertain outcome, never a false one).
            with contextlib.suppress(OSError):
                oomscore.write(self.init_pid or 0, self.init_oom)
            self.init_oom = None

    def _pin_oom_score(self, init: int) -> None:
        """Pin pid 1's score at the candidate's, for the spawn to pass on (see oomscore.py)."""
        try:
            with open(f"/proc/{init}/oom_score_adj", "rb") as handle:
                own = handle.read().strip() or b"0"
            oomscore.write(init, oomscore.CANDIDATE)
        except OSError as exc:
            raise StepError("oom score", exc) from exc
        self.init_oom = own

    def _expect(self, words: str | tuple[str, ...], deadline: float) -> str:
        """The next status line, which must start with one of `words`; a failure raises."""
        expected = (words,) if isinstance(words, str) else words
        line = self._read_line(deadline)
        if line is None:
            raise StepError("envelope", f"no answer from the envelope while waiting for {words!r}")
        if line.startswith("fail "):
            step, _, error = line[5:].partition("\t")
            raise StepError(step, error)
        if not line.startswith(expected):
            raise StepError("envelope", f"unexpected status {line!r} while waiting for {words!r}")
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
        if self.scratch_fd >= 0:
            os.close(self.scratch_fd)
            self.scratch_fd = -1
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
        if not problems:
            self.registration.drop()
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


def _write_id_maps(pid: int) -> None:
    try:
        idmap.write_id_maps(pid)
    except OSError as exc:
        raise StepError("user namespace id maps", exc) from exc
