"""What one envelope holds in the kernel, and the one way it is let go of.

An envelope holds its host ids' lease (hostids.py), its cgroup job (registered before it
exists), pid 1 (its pid and pidfd), the three channels to pid 1 (control socket, status
pipe, go pipe), pid 1's namespaces, the scratch root, the candidate's stdio until the go,
and the envelope slot's lock. The rule this module owns: nothing of it is dropped
unproved. The tree is killed, pid 1 reaped, the job removed only once the kernel confirms
it empty (a cgroup that still holds a task cannot be removed), and only then are the
registry entry dropped and the host ids let go of; what could not be proved is named. The
namespaces are let go of last, after the answer (see `spawning.hold_namespaces`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
from collections.abc import Callable
from typing import Protocol

from jigcmd import trace
from jigcmd.envelope import (
    cgroups,
    hostids,
    idmap,
    oomscore,
    pid1,
    rootfs,
    scratchfile,
    spawning,
    staging,
)
from jigcmd.envelope.failure import StepError
from jigcmd.envelope.ledger import Registration
from jigcmd.envelope.pid1 import Blueprint, Handed
from jigcmd.envelope.scratchfile import ScratchRead
from jigcmd.envelope.spawner import Spawner
from jigcmd.fdwait import readable
from jigcmd.plan import RunPlan, ScratchFile

__all__ = ["EMPTY_WAIT", "Holdings", "Watcher"]

# How long a killed tree may take to be gone before what is left is reported.
EMPTY_WAIT = 2.0


class Watcher(Protocol):
    """What holdings need of the zygote's loop: to watch and stop watching descriptors."""

    def watch(self, fd: int, callback: Callable[[], None]) -> None:
        """Call `callback` whenever `fd` turns readable."""

    def unwatch(self, fd: int) -> None:
        """Stop watching `fd` (before it is closed)."""


class Holdings:
    """One envelope's kernel objects, from its registry entry to its last descriptor."""

    def __init__(self, loop: Watcher, registration: Registration) -> None:
        self.loop = loop
        self.registration = registration
        # The host uid and gid its 0 maps to, leased until the release proves it gone.
        self.ids: hostids.HostIds | None = None
        self.job: cgroups.CgroupJob | None = None
        self.init_pid: int | None = None
        self.pidfd = -1
        self.control: socket.socket | None = None
        self.status_r = -1
        self.go_w = -1
        # Pid 1's namespaces, held until after the answer (see `spawning.hold_namespaces`).
        self.namespaces: list[int] = []
        # The root of the envelope's scratch, from pid 1 (see `pid1._hand_over_scratch`).
        self.scratch_fd = -1
        # The candidate's stdio and gate, from the launch until they are handed to pid 1.
        self.stdio: Handed | None = None
        self.slot_fd = -1

    def start(
        self,
        name: str,
        plan: RunPlan,
        backend: cgroups.CgroupBackend,
        spawner: Spawner | None = None,
    ) -> tuple[int, int]:
        """Register job `name`, create it and have pid 1 cloned into it.

        By `spawner` while it is usable, else by this process (in pid 1 this never returns).
        Returns pid 1's status pipe and pidfd, for the caller to watch. Raises StepError
        when a step fails (the caller lets go of what exists).
        """
        # Registered before it exists: if the zygote dies from here on, recovery knows the
        # cgroup job to fence and remove.
        try:
            self.registration.register(name)
        except OSError as exc:
            entry = f" entry {exc.filename}" if exc.filename else ""
            raise StepError(f"envelope registry{entry}", exc) from exc
        try:
            self.ids = hostids.take(plan.profile)
        except (hostids.HostIdError, OSError) as exc:
            raise StepError("host ids", exc) from exc
        try:
            self.job = job = backend.create(name, plan.limits)
        except (OSError, ValueError) as exc:
            raise StepError("cgroup", exc) from exc
        trace.mark("supervisor: job created")
        blueprint = _blueprint(plan, job)
        self.control, init_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.status_r, status_w = os.pipe2(os.O_CLOEXEC)
        go_r, self.go_w = os.pipe2(os.O_CLOEXEC)
        channels = (init_end.fileno(), status_w, go_r)
        try:
            cloned = spawner.clone(blueprint, channels) if spawner is not None else None
            init = cloned if cloned is not None else _clone_here(job, blueprint, channels)
            trace.mark("supervisor: pid 1 cloned")
            self.init_pid = init
            self.pidfd = os.pidfd_open(init)
        finally:
            init_end.close()
            os.close(status_w)
            os.close(go_r)
        os.set_blocking(self.status_r, False)
        return self.status_r, self.pidfd

    def let_build(self) -> str:
        """Pid 1 has unshared: hold its namespaces, map its ids and let it build its root.

        Returns its network namespace as `net:[inode]`.
        """
        assert self.init_pid is not None
        held = spawning.hold_namespaces(self.init_pid)
        self.namespaces = list(held.values())
        if "net" not in held:
            raise StepError("network namespace", "pid 1's network namespace cannot be opened")
        assert self.ids is not None
        try:
            idmap.write_id_maps(self.init_pid, (self.ids.uid, self.ids.gid))
        except OSError as exc:
            raise StepError("user namespace id maps", exc) from exc
        os.write(self.go_w, b"g")
        os.close(self.go_w)
        self.go_w = -1
        return f"net:[{os.fstat(held['net']).st_ino}]"

    def take_scratch(self) -> None:
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

    def read_scratch(self, wanted: ScratchFile) -> ScratchRead:
        """The scratch file the plan names, read once every process of the run is gone."""
        return scratchfile.read_scratch_file(self.scratch_fd, wanted)

    def pin_oom_score(self) -> bytes:
        """Pin pid 1's score at the candidate's, for the spawn to pass on; its own score.

        See oomscore.py.
        """
        assert self.init_pid is not None
        try:
            with open(f"/proc/{self.init_pid}/oom_score_adj", "rb") as handle:
                own = handle.read().strip() or b"0"
            oomscore.write(self.init_pid, oomscore.CANDIDATE)
        except OSError as exc:
            raise StepError("oom score", exc) from exc
        return own

    def close_stdio(self) -> None:
        """Close the candidate's stdio and gate if they were never handed over."""
        for fd in self.stdio or ():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.stdio = None

    def kill_and_wait(self) -> None:
        """SIGKILL the tree and wait (bounded, blocking) for pid 1 to be gone.

        The one wait that blocks the loop: a kill of an envelope that never ran or whose
        step failed; a SIGKILLed pid 1 goes in a few milliseconds.
        """
        self.close_stdio()
        self.signal_tree()
        if self.init_pid is not None and self.pidfd >= 0:
            readable(self.pidfd, EMPTY_WAIT)
            self.reap()

    def signal_tree(self) -> None:
        """SIGKILL every task of the job (if any may be left) and pid 1."""
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

    def reap(self) -> None:
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

    def release(self) -> tuple[bool, tuple[str, ...]]:
        """Confirm the tree is gone and remove the cgroup (the namespaces go after the answer).

        Returns whether the cleanup is proved, and what is not.
        """
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
        # it); they are freed when `close` drops the last reference.
        if not problems:
            self.registration.drop()
            # Every process of the envelope is gone: its ids may serve another. Unproved,
            # the lease stays held for the zygote's life.
            if self.ids is not None:
                hostids.let_go(self.ids)
                self.ids = None
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
            empty = self.job.wait_empty(EMPTY_WAIT)
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

    def free_slot(self) -> None:
        """Let the envelope slot go (a waiting caller may take it)."""
        if self.slot_fd >= 0:
            os.close(self.slot_fd)
            self.slot_fd = -1

    def close(self) -> None:
        """Let go of every descriptor still held; the namespaces last."""
        for fd in (self.status_r, self.pidfd):
            if fd >= 0:
                self.loop.unwatch(fd)
                os.close(fd)
        if self.go_w >= 0:
            os.close(self.go_w)
        self.status_r = self.go_w = self.pidfd = -1
        if self.control is not None:
            self.control.close()
            self.control = None
        trace.mark("supervisor: closed")
        # The kernel tears the namespaces down now, after the answer.
        for fd in self.namespaces:
            os.close(fd)
        self.namespaces = []


def _blueprint(plan: RunPlan, job: cgroups.CgroupJob) -> Blueprint:
    """What pid 1 is made from (`pid1.Blueprint`); StepError when a bind has no source."""
    memory_limit = job.memory_view()[1]
    template = rootfs.template(plan, memory_limit)
    sources: tuple[tuple[str, str], ...] = ()
    if template is None:
        try:
            sources = tuple((bind.source, staging.source_of(bind)) for bind in plan.binds)
        except staging.StagingError as exc:
            raise StepError("open bind sources", exc) from exc
    return Blueprint(pid1.shaped(plan), job.membership, memory_limit, template, sources)


def _clone_here(
    job: cgroups.CgroupJob, blueprint: Blueprint, channels: tuple[int, int, int]
) -> int:
    """Clone pid 1 from this process (no spawner, or it refused); its pid."""
    init, born_in = spawning.spawn_init(job, channels)
    if init == 0:
        control, status_w, go_r = channels
        try:
            pid1.Init(blueprint, socket.socket(fileno=control), status_w).start(born_in, go_r)
        finally:
            os._exit(1)  # a clone of the zygote must never return into its loop
    return init
