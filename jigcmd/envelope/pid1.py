"""Pid 1 of an envelope: builds the root, then starts the candidate and reports how it ended.

Pid 1 is the envelope's trusted collector: the candidate's end and exit status come from
it, so nothing of the candidate may reach it. It is non-dumpable from its first step (no
`ptrace`, `/proc/1/mem` or `pidfd_getfd` for anyone without `CAP_SYS_PTRACE` over the host),
it has no signal handlers (pid 1 of a namespace never receives a signal from inside it that
it has no handler for, SIGKILL included), and it reads nothing the candidate writes: it
blocks in `waitid` for the kernel's word on its children. It watches its supervisor through
`PR_SET_PDEATHSIG` (SIGKILL), so it dies with it and takes the namespace along: the zygote
is its parent also when the spawner cloned it (`CLONE_PARENT`, see spawner.py).

Before it says it is prepared it seals the empty candidate tree (read-only, keeping one
writable copy of its mount, candidatetree.open_candidate_tree) and drops its own privileges exactly
as far as the candidate's (the same uid, no capabilities, securebits, no_new_privs, the
seccomp filter). At the go it writes the candidate files through that copy and lets it go,
waits for the gate and starts Bun with `posix_spawn` (vfork: no copy of this image, no
Python between the spawn and Bun's exec). The candidate is then its only child until
orphans arrive; pid 1 reaps those, and when the candidate ends it SIGKILLs everything else
in the namespace before it reaps the candidate and reports.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import socket
import time
from collections.abc import Iterator
from typing import NamedTuple, NoReturn

from jigcmd import trace
from jigcmd.envelope import (
    candidatetree,
    cgroups,
    exact,
    idmap,
    netns,
    oomscore,
    privileges,
    rootfs,
    seccomp,
    ucounts,
)
from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.failure import CWD_CHANGED, HOST_DIR_CHANGED, StepError
from jigcmd.envelope.marshalcodec import MARSHAL
from jigcmd.envelope.messages import Go, recv_message
from jigcmd.plan import RunPlan

__all__ = ["Blueprint", "Handed", "Init", "drop_handlers_for_clones", "report", "shaped"]

_PR_SET_PDEATHSIG = 1
_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4
# What travels to pid 1 with the go: stdin, stdout, stderr and the gate.
_HANDED_FDS = 4
# Decided once, in the zygote, as host identity: inside the namespace everyone is uid 0.
_ROOTLESS = idmap.rootless()
# Python ignores SIGPIPE and SIGXFSZ (and the zygote SIGINT); ignored dispositions survive
# exec, so the spawn sets them back to the default for the candidate.
_CANDIDATE_DEFAULTS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGCHLD)

# Whether the process pid 1 is cloned from dropped every signal handler and proved it
# (`drop_handlers_for_clones`, the spawner at its start): clone3 without CLONE_SIGHAND copies
# the dispositions, so that one proof stands for every pid 1 it clones, and spares each of
# them reading its own status (docs/envelope.md, "Pid 1's steps, one by one").
_handlers_dropped = False

# The envelope's own scratch tmpfs, mounted by pid 1 (see rootfs.py), not the host's /tmp.
_SCRATCH = "/tmp"  # noqa: S108
# stdin, stdout, stderr and the gate, in that order.
Handed = tuple[int, int, int, int]


class Blueprint(NamedTuple):
    """What pid 1 is made from: its envelope's prepared shape, no request's data in it.

    Plain data (it travels to the spawner, see spawner.py): the plan's shape (`shaped`), the
    job's directories, the memory limit the kernel enforces as read back at create time (what
    Bun sees), the zygote's template root for this shape (`rootfs.template`, None to build
    one) and, without a template, each bind's source with the path pid 1 opens for it (its
    staged copy or itself, `staging.source_of`, resolved by the zygote).
    """

    plan: RunPlan
    membership: cgroups.Membership
    memory_limit: str
    template: str | None
    sources: tuple[tuple[str, str], ...]


def shaped(plan: RunPlan) -> RunPlan:
    """`plan` without the request's own data: what pid 1 needs before the go (see `Go`)."""
    return plan._replace(argv=(), env=(), files=(), stdin=b"", scratch_file=None, cpus=())


class Init:
    """Pid 1: builds the root, waits for the go, then starts the candidate and reaps."""

    def __init__(self, blueprint: Blueprint, control: socket.socket, status_w: int) -> None:
        self.plan = blueprint.plan
        self.blueprint = blueprint
        self.sources: dict[str, int] = {}
        self.template_fd = -1
        # The writable copy of the candidate tree (candidatetree.open_candidate_tree), until the go.
        self.tree_fd = -1
        self.control = control
        self.status_w = status_w
        self.candidate = -1
        # Pid 1's own OOM score, writable through this descriptor after it turned
        # non-dumpable (see oomscore.py); unused when the supervisor pins the score.
        self.oom_fd = -1
        self.oom_own = b"0"

    def start(self, born_in: str | None, go_r: int) -> NoReturn:
        """Pid 1's first steps, still host uid 0: cgroups, namespaces, bind sources, id maps."""
        step = "oom score"
        try:
            if not oomscore.PINNED:
                # Still host uid 0 and dumpable: the uid change below makes pid 1 non-dumpable,
                # and its /proc/self then belongs to host root.
                self.oom_fd, self.oom_own = oomscore.open_own()
            sc.set_name("jigcmd-init")
            # Its first mark: the host's /proc is still its /proc (see trace.py).
            trace.mark("init: named")
            step = "join cgroup"
            # Before any candidate code: nothing of the envelope runs unlimited.
            cgroups.join(self.blueprint.membership, born_in)
            trace.mark("init: joined")
            step = "cgroup namespace"
            # After the join, so that the namespace's root is the job in every hierarchy.
            sc.unshare(sc.CLONE_NEWCGROUP)
            if _ROOTLESS:
                step = "network namespace"
                netns.loopback_up()
            step = "open bind sources"
            # In the new mount namespace (a bind from a descriptor must name a mount of the
            # caller's namespace) and while still host uid 0 (see rootfs.build_root).
            if self.blueprint.template is not None:
                flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                self.template_fd = os.open(self.blueprint.template, flags)
            else:
                self.sources = self._open_sources()
            report(self.status_w, "unshared")
            step = "wait for id maps"
            if os.read(go_r, 1) != b"g":
                _fail(self.status_w, step, "supervisor went away")
            os.close(go_r)
            step = "become namespace root"
            os.setresgid(0, 0, 0)
            # The effective and saved uid only: the real uid stays host root's until the
            # scratch is handed over (`_hand_over_scratch`), so that the kernel charges that
            # one SCM_RIGHTS message to host root, not to the uid every candidate has.
            os.setresuid(-1, 0, 0)
        except StepError as exc:
            _fail(self.status_w, exc.step, exc.error)
        except BaseException as exc:  # noqa: BLE001 - pid 1 reports every failure, then exits
            _fail(self.status_w, step, exc)
        self.main()

    def _open_sources(self) -> dict[str, int]:
        """An O_PATH descriptor per bind source; a host plan's exactly (see exact.py).

        A host plan's envelope is never prepared ahead of its request, so its sources are
        opened after the policy checked them: what is bound is what sits at the checked path.
        """
        sources: dict[str, int] = {}
        if self.plan.profile != "host":
            for source, path in self.blueprint.sources:
                sources[source] = os.open(path, os.O_PATH | os.O_CLOEXEC)
            return sources
        cwd_sources = {b.source for b in self.plan.binds if b.target == self.plan.cwd}
        for source, path in self.blueprint.sources:
            changed = CWD_CHANGED if source in cwd_sources else HOST_DIR_CHANGED
            sources[source] = exact.open_exact(path, changed)
        return sources

    def main(self) -> NoReturn:
        """Build the root, wait for the go, start the candidate, reap; never returns."""
        step = "init"
        try:
            # /proc/1 must not be readable by the candidate (it holds the zygote's image).
            sc.prctl(_PR_SET_DUMPABLE, 0)
            step = "signal handlers"
            if not _handlers_dropped:
                _drop_handlers()
            step = "set hostname"
            socket.sethostname("jigcmd")
            step = "bound the counts charged to the host"
            # With CAP_SYS_RESOURCE in this namespace (gone at the drop), through the host's
            # procfs (the envelope's own has no sys, see ucounts.py).
            ucounts.bound_namespace()
            step = "prepare privilege drop"
            privileges.prepare()
            seccomp.build_filter()
            if self.template_fd >= 0:
                rootfs.enter_template(self.template_fd, self.plan)
                os.close(self.template_fd)
            else:
                rootfs.build_root(self.plan, self.sources, self.blueprint.memory_limit)
            for fd in self.sources.values():
                os.close(fd)
            if self.plan.profile == "candidate":
                self.tree_fd = candidatetree.open_candidate_tree()
            step = "hand over the scratch"
            _hand_over_scratch(self.control)
            step = "become namespace root"
            # The real uid too, now that pid 1 sends no descriptor any more: the candidate's.
            os.setresuid(0, 0, 0)
            step = "drop privileges"
            # The whole drop, the seccomp filter last (its install is ~0.3 ms of the kernel's,
            # the filter's JIT above all), off the request's path: nothing pid 1 does at the
            # go needs a capability or a mount (the files go through the tree's copy).
            privileges.begin_drop(self.plan.limits.nofile, self.plan.limits.fsize_bytes)
            # Rootless, the user's own supplementary groups cannot be dropped (see privileges).
            privileges.finish_drop(frozenset(os.getgroups()) if _ROOTLESS else frozenset())
            trace.mark("init: dropped")
            step = "watch the supervisor"
            # After the drop, the last change of pid 1's credentials (one clears the death
            # signal): from here pid 1 dies with the zygote, its parent; a zygote that died
            # before this was set has closed the control socket.
            sc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if _closed(self.control):
                os._exit(0)
            if sc.prctl(_PR_GET_DUMPABLE) != 0:
                raise OSError(errno.EPERM, "pid 1 is dumpable")
            # From here on nothing of the envelope runs until a request arrives.
            report(self.status_w, "prepared")
            step = "wait for the request"
            trace.mark("init: waiting")
            go, stdio = self._receive_go()
            trace.mark("init: go")
            self._start_candidate(go, stdio)
        except rootfs.RootfsError as exc:
            _fail(self.status_w, f"root filesystem: {exc.step}", str(exc).partition(": ")[2])
        except _Failed as exc:
            _fail(self.status_w, exc.step, exc.detail)
        except BaseException as exc:  # noqa: BLE001 - pid 1 reports every failure, then exits
            _fail(self.status_w, step, exc)
        self._reap()

    def _receive_go(self) -> tuple[Go, Handed]:
        received = recv_message(self.control, max_fds=_HANDED_FDS, codec=MARSHAL)
        if received is None:
            # The supervisor is gone; exiting pid 1 kills everything in the namespace.
            os._exit(0)
        message, fds = received
        if not isinstance(message, Go) or len(fds) != _HANDED_FDS:
            raise RuntimeError("malformed go message")
        return message, (fds[0], fds[1], fds[2], fds[3])

    def _start_candidate(self, go: Go, stdio: Handed) -> None:
        """Seal the files, drop to the candidate's privileges, wait for the gate, spawn Bun."""
        with _step("cpu pin"):
            if go.cpus:
                # Pid 1's own mask, inherited by the spawn: the CPU count Bun reads.
                _pin_affinity(go.cpus)
        with _step("candidate files"):
            if self.plan.profile == "candidate":
                tree, self.tree_fd = self.tree_fd, -1
                candidatetree.seal_candidate(go.files, tree)
        with _step("drop privileges"):
            # Every descriptor of pid 1 above 2 stays out of the candidate, whatever it is.
            sc.close_range(3, 0xFFFFFFFF, sc.CLOSE_RANGE_CLOEXEC)
        with _step("withdrawn"):
            # Staged: the server opens the gate once its journal row is durable. EOF instead
            # means the launch was withdrawn (a replay, a cancel, the server gone): nothing runs.
            if os.read(stdio[3], 1) != b"g":
                raise RuntimeError("the launch was withdrawn before the candidate started")
        trace.mark("init: gate open")
        with _step("working directory"):
            os.chdir(go.cwd)
        program, executed = -1, ""
        if go.program:
            # Last before the spawn, from inside the envelope; the spawn executes the file
            # this opened, through its descriptor (a `#!` script by its path: see exact.py).
            try:
                program = exact.open_exact_program(go.program)
                executed = exact.exec_path(program, go.program)
            except StepError as exc:
                raise _Failed(exc.step, exc.error) from exc
        with _step("exec runtime"):
            if self.oom_fd >= 0:
                oomscore.set_via(self.oom_fd, oomscore.CANDIDATE)
            # The candidate's start (where setupMs ends and wallMs begins): taken before the
            # spawn, the last moment known to precede its exec, so that nothing the candidate
            # does can fall outside its wall time, however late pid 1 runs after the exec
            # (the vfork's child and Bun may hold the CPU pid 1 shares with them).
            began = time.monotonic_ns()
            try:
                self.candidate = os.posix_spawn(
                    executed or go.argv[0],
                    list(go.argv),
                    dict(go.env),
                    file_actions=[
                        (os.POSIX_SPAWN_DUP2, stdio[0], 0),
                        (os.POSIX_SPAWN_DUP2, stdio[1], 1),
                        (os.POSIX_SPAWN_DUP2, stdio[2], 2),
                    ],
                    setsid=True,
                    setsigdef=_CANDIDATE_DEFAULTS,
                    setsigmask=(),
                )
            finally:
                if self.oom_fd >= 0:
                    oomscore.set_via(self.oom_fd, self.oom_own)
                    os.close(self.oom_fd)
                    self.oom_fd = -1
                if program >= 0:
                    os.close(program)
                # The output's EOF must come when the candidate's writers are gone.
                for fd in stdio:
                    os.close(fd)
        report(self.status_w, f"ready {self.candidate} {began}")

    def _reap(self) -> NoReturn:
        self.control.close()
        status, ended = None, 0
        while status is None:
            # Peek before reaping: while the candidate is a zombie it still "exists"
            # (kill(pid, 0) succeeds), so an orphan polling for its end cannot see it
            # before everything else in the namespace is SIGKILLed. Blocking: no signal
            # handler, nothing to read from the candidate.
            try:
                waitable = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
            except ChildProcessError:
                os._exit(0)
            if waitable is None:
                continue
            if waitable.si_pid == self.candidate:
                # The end the envelope saw, at or after the candidate's exit: pid 1 is the
                # first to see it (its report may be handled much later).
                ended = time.monotonic_ns()
                # As pid 1, kill(-1) reaches every other process of this namespace.
                with contextlib.suppress(OSError):  # nothing else was left
                    os.kill(-1, signal.SIGKILL)
                _pid, status = os.waitpid(self.candidate, 0)
            else:
                os.waitpid(waitable.si_pid, 0)
        if os.WIFSIGNALED(status):
            report(self.status_w, f"signal {os.WTERMSIG(status)} {ended}")
        else:
            report(self.status_w, f"exit {os.WEXITSTATUS(status)} {ended}")
        trace.mark("init: exit")
        # Exiting pid 1 makes the kernel SIGKILL everything left in the namespace: a daemon
        # or a double-forked grandchild does not outlive the candidate's main process.
        os._exit(0)


class _Failed(Exception):
    def __init__(self, step: str, detail: str) -> None:
        super().__init__(f"{step}: {detail}")
        self.step = step
        self.detail = detail


@contextlib.contextmanager
def _step(name: str) -> Iterator[None]:
    """Name the step whose failure is reported if the block raises."""
    try:
        yield
    except (_Failed, SystemExit):
        raise
    except BaseException as exc:
        text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise _Failed(name, text) from exc


def _hand_over_scratch(control: socket.socket) -> None:
    """Give the supervisor a descriptor of the scratch's root, taken before any candidate code.

    With it the supervisor reads a report the runner wrote there after the run (see
    envelope/scratchfile.py) without a path through a root the candidate could have changed.

    Sent while pid 1's real uid is still host root's: the kernel counts descriptors in flight
    in SCM_RIGHTS messages per host user (the real uid's) and refuses a send once that count
    passes the sender's RLIMIT_NOFILE. Every candidate has the envelope's uid, so as that uid
    this send failed (ETOOMANYREFS) while any candidate held ~500 descriptors in flight and
    the server's limit was lower (docs/envelope.md, ordering rule 14, with the measurement
    against the zygote's `pidfd_getfd`). Host root's count is no candidate's to raise.
    """
    scratch = os.open(_SCRATCH, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        socket.send_fds(control, [b"s"], [scratch])
    finally:
        os.close(scratch)


def drop_handlers_for_clones() -> None:
    """Leave the calling process without a signal handler, proved, for every pid 1 it clones.

    For a process that installs none afterwards (the spawner): its clones then skip the check.
    """
    global _handlers_dropped  # noqa: PLW0603 - one fact of this process, inherited by clones
    _drop_handlers()
    _handlers_dropped = True


def _drop_handlers() -> None:
    """Leave pid 1 without any signal handler (Python's, faulthandler's, …): each could be
    triggered by the candidate, and a fault handler re-raising would kill pid 1."""
    caught = _caught()
    if not caught:
        # The usual case (the zygote catches no signal): this one read is the proof.
        return
    for signum in caught:
        # Not signal.signal: Python would keep believing in its own handler (harmless, it
        # never runs again), but glibc refuses its internal signals (see default_signal).
        sc.default_signal(signum)
    left = _caught()
    if left:
        raise OSError(errno.EPERM, f"pid 1 still has handlers for signals {sorted(left)}")


def _caught() -> list[int]:
    """The signals the calling process has a handler for (`SigCgt` in /proc/self/status)."""
    mask = int(privileges.read_status(("SigCgt",))["SigCgt"], 16)
    return [bit + 1 for bit in range(64) if mask >> bit & 1]


def _closed(sock: socket.socket) -> bool:
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLRDHUP)
    return any(events & (select.POLLHUP | select.POLLRDHUP) for _fd, events in poller.poll(0))


def _pin_affinity(cpus: tuple[int, ...]) -> None:
    """Set pid 1's affinity mask to `cpus` (the spawn inherits it); raise unless it holds.

    The CPU count Bun reads (and sizes its thread pools by) is its affinity mask, and
    without a cpuset this mask is the only pin there is.
    """
    os.sched_setaffinity(0, cpus)
    granted = os.sched_getaffinity(0)
    if granted != set(cpus):
        raise OSError(
            errno.EINVAL, f"the candidate is pinned to {sorted(granted)}, not {sorted(cpus)}"
        )


def report(fd: int, text: str) -> None:
    """Write one status line to the supervisor (lost if it is gone).

    `ready PID T` and `exit N T` / `signal N T` carry the candidate's start and end as pid 1
    took them, T in `CLOCK_MONOTONIC` nanoseconds: the supervisor's clock too (pid 1 is in
    no time namespace), on which it times the envelope's setup and the run.
    """
    with contextlib.suppress(OSError):
        os.write(fd, text.encode("utf-8", "replace") + b"\n")


def _fail(fd: int, step: str, error: BaseException | str) -> NoReturn:
    message = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    report(fd, f"fail {step}\t{message}".replace("\n", " "))
    os._exit(1)
