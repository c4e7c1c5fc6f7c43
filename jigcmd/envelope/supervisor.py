"""One run's supervisor: builds the envelope around the candidate, enforces its deadline, cleans up.

Process shape (each arrow is a fork; no exec until the candidate's own):

    supervisor  (host root; child subreaper; owns cgroup, netns, deadline, cleanup)
      └─ entrant (joins the cgroup, then the netns, then unshares user/mnt/pid/ipc/uts/cgroup)
           └─ init, pid 1 of the new pid namespace (builds the root, reaps)  ← reparented to supervisor
                └─ candidate (drops every privilege, installs seccomp, execs Bun)

The supervisor is a separate process from the server and keeps working if the server dies:
losing the run socket counts as a cancel, so the tree is fenced and released either way.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import time

from jigcmd.envelope import cgroups, netns, privileges, rootfs, seccomp
from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.wire import Cancel, Failed, Finished, Started, recv_message, send_message
from jigcmd.plan import RunPlan

__all__ = ["supervise"]

_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_DUMPABLE = 4
_PR_SET_PDEATHSIG = 1
_NAMESPACES = (
    sc.CLONE_NEWUSER
    | sc.CLONE_NEWNS
    | sc.CLONE_NEWPID
    | sc.CLONE_NEWIPC
    | sc.CLONE_NEWUTS
    | sc.CLONE_NEWCGROUP
)
# Inside the user namespace, uid/gid 0 is host 65534: unprivileged on the host.
_HOST_ID = 65534
_EMPTY_WAIT = 2.0
_SETUP_GRACE = 5.0


class _StepError(Exception):
    def __init__(self, step: str, error: BaseException | str) -> None:
        super().__init__(f"{step}: {error}")
        self.step = step
        self.error = (
            str(error) if not isinstance(error, OSError) else (error.strerror or str(error))
        )


def supervise(
    run_id: str,
    plan: RunPlan,
    stdio: tuple[int, int, int],
    sock: socket.socket,
    backend: cgroups.CgroupBackend,
) -> None:
    """Run `plan` to its end and report over `sock`; never returns (exits the process)."""
    start = time.monotonic()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    sc.prctl(_PR_SET_CHILD_SUBREAPER, 1)
    run = _Run(run_id, plan, stdio, sock, backend, start)
    code = 0
    try:
        run.execute()
    except BaseException:  # noqa: BLE001 - the supervisor must always try to report and clean up
        code = 1
    finally:
        os._exit(code)


class _Run:
    def __init__(
        self,
        run_id: str,
        plan: RunPlan,
        stdio: tuple[int, int, int],
        sock: socket.socket,
        backend: cgroups.CgroupBackend,
        start: float,
    ) -> None:
        self.run_id = run_id
        self.plan = plan
        self.stdio = stdio
        self.sock = sock
        self.backend = backend
        self.start = start
        self.name = f"jigcmd-{run_id}"
        self.job: cgroups.CgroupJob | None = None
        self.netns: str | None = None
        self.init_pid: int | None = None
        self.status_r = -1
        self.buffer = b""

    def execute(self) -> None:
        try:
            self._setup()
        except _StepError as exc:
            self._fence()
            ok, problems = self._release()
            self._send(
                Failed(
                    step=exc.step, error=exc.error, cleanup_complete=ok, cleanup_problems=problems
                )
            )
            return
        assert self.job is not None and self.netns is not None and self.init_pid is not None
        setup_ms = (time.monotonic() - self.start) * 1000
        self._send(
            Started(
                supervisor_pid=os.getpid(),
                init_pid=self.init_pid,
                cgroup_paths=self.job.paths,
                netns=self.netns,
                setup_ms=setup_ms,
            )
        )
        started = time.monotonic()
        exit_code, sig, reason = self._wait()
        wall_ms = (time.monotonic() - started) * 1000
        self._fence()
        stats = self.job.stats()
        ok, problems = self._release()
        self._send(
            Finished(
                exit_code=exit_code,
                signal=sig,
                stop_reason=reason,
                wall_ms=wall_ms,
                cpu_ms=None if stats.cpu_usage_ns is None else stats.cpu_usage_ns / 1e6,
                peak_memory_bytes=stats.peak_memory_bytes,
                oom_killed=stats.oom_killed,
                pids_limit_hit=stats.pids_limit_hit,
                cleanup_complete=ok,
                cleanup_problems=problems,
            )
        )

    # -- setup -------------------------------------------------------------------------

    def _setup(self) -> None:
        if time.monotonic() >= self.plan.deadline:
            raise _StepError("deadline", "deadline passed before setup")
        try:
            self.job = self.backend.create(self.name, self.plan.limits)
        except OSError as exc:
            raise _StepError("cgroup", exc) from exc
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        go_r, go_w = os.pipe2(os.O_CLOEXEC)
        self.status_r = status_r
        entrant = os.fork()
        if entrant == 0:
            os.close(status_r)
            os.close(go_w)
            _entrant(self.plan, self.job, self.stdio, status_w, go_r)
        os.close(status_w)
        os.close(go_r)
        for fd in self.stdio:
            os.close(fd)
        try:
            self._expect("unshared")
            self.netns = f"net:[{os.stat(f'/proc/{entrant}/ns/net').st_ino}]"
            _write_id_maps(entrant)
            os.write(go_w, b"g")
            init_line = self._expect("init")
            self.init_pid = int(init_line.split()[1])
            os.waitpid(entrant, 0)
            self._expect("ready")
        finally:
            os.close(go_w)

    def _expect(self, word: str) -> str:
        deadline = min(self.plan.deadline, time.monotonic() + _SETUP_GRACE)
        line = self._read_line(deadline)
        if line is None:
            raise _StepError("envelope", f"no answer from the envelope while waiting for {word!r}")
        if line.startswith("fail "):
            step, _, error = line[5:].partition("\t")
            raise _StepError(step, error)
        if not line.startswith(word):
            raise _StepError("envelope", f"unexpected status {line!r} while waiting for {word!r}")
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

    # -- running -----------------------------------------------------------------------

    def _wait(self) -> tuple[int | None, str | None, str]:
        poller = select.poll()
        poller.register(self.status_r, select.POLLIN)
        poller.register(self.sock.fileno(), select.POLLIN)
        while True:
            timeout = self.plan.deadline - time.monotonic()
            if timeout <= 0:
                return self._stop("deadline")
            for fd, _events in poller.poll(timeout * 1000):
                if fd == self.status_r:
                    line = self._read_line(time.monotonic() + 1.0)
                    if line is None:
                        # init died without a word: it was killed from outside the envelope.
                        return self._stop("cancelled")
                    kind, _, value = line.partition(" ")
                    if kind == "exit":
                        return int(value), None, "exited"
                    if kind == "signal":
                        return None, signal.Signals(int(value)).name, "exited"
                elif fd == self.sock.fileno():
                    try:
                        message = recv_message(self.sock)
                    except (OSError, EOFError, ValueError):
                        message = None
                    if message is None or isinstance(message[0], Cancel):
                        # A cancel, or the server is gone: fence now, never leave it running.
                        return self._stop("cancelled")

    def _stop(self, reason: str) -> tuple[int | None, str | None, str]:
        self._fence()
        return None, "SIGKILL", reason

    # -- fencing and release -----------------------------------------------------------

    def _fence(self) -> None:
        """SIGKILL the whole tree: the cgroup (every process in it) and pid 1 of the namespace."""
        if self.job is not None:
            with contextlib.suppress(OSError):
                self.job.kill()
        if self.init_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, signal.SIGKILL)
        _reap_all()

    def _release(self) -> tuple[bool, tuple[str, ...]]:
        problems: list[str] = []
        if self.job is not None:
            deadline = time.monotonic() + _EMPTY_WAIT
            while True:
                try:
                    populated = self.job.populated()
                except OSError as exc:
                    problems.append(f"cgroup state unreadable: {exc}")
                    break
                if not populated:
                    break
                if time.monotonic() > deadline:
                    problems.append("cgroup still populated after kill")
                    break
                with contextlib.suppress(OSError):
                    self.job.kill()
                _reap_all()
                time.sleep(0.001)
            if not problems:
                try:
                    self.job.remove()
                except OSError as exc:
                    problems.append(f"cgroup not removed: {exc}")
        # The network namespace has no name or mount: it is released with its last
        # process, which the empty cgroup above has just confirmed.
        return not problems, tuple(problems)

    def _send(self, message: Started | Finished | Failed) -> None:
        # The server may be gone; the journal (written by the server) then records nothing
        # more, and recovery closes the run as uncertain.
        with contextlib.suppress(OSError):
            send_message(self.sock, message)


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
        with open(f"/proc/{pid}/uid_map", "w", encoding="ascii") as handle:
            handle.write(f"0 {_HOST_ID} 1\n")
        with open(f"/proc/{pid}/setgroups", "w", encoding="ascii") as handle:
            handle.write("deny\n")
        with open(f"/proc/{pid}/gid_map", "w", encoding="ascii") as handle:
            handle.write(f"0 {_HOST_ID} 1\n")
    except OSError as exc:
        raise _StepError("user namespace id maps", exc) from exc


def _report(fd: int, text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, text.encode("utf-8", "replace") + b"\n")


def _fail(fd: int, step: str, error: BaseException | str) -> None:
    message = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    _report(fd, f"fail {step}\t{message}".replace("\n", " "))
    os._exit(1)


def _entrant(
    plan: RunPlan,
    job: cgroups.CgroupJob,
    stdio: tuple[int, int, int],
    status_w: int,
    go_r: int,
) -> None:
    """Join the cgroup, enter a fresh network namespace, unshare the rest, fork pid 1, exit."""
    step = "drop supplementary groups"
    try:
        # Host root's supplementary group 0 would otherwise survive into the namespace.
        os.setgroups([])
        step = "join cgroup"
        # Before any namespace and long before candidate code: nothing runs unlimited.
        job.attach(os.getpid())
        step = "network namespace"
        # Still host root here: the namespace is owned by the host user namespace, so the
        # candidate can never reconfigure it (see jigcmd.envelope.netns).
        netns.enter_fresh()
        step = "unshare namespaces"
        sc.unshare(_NAMESPACES)
        _report(status_w, "unshared")
        step = "wait for id maps"
        if os.read(go_r, 1) != b"g":
            _fail(status_w, step, "supervisor went away")
        step = "become namespace root"
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
        step = "fork init"
        pid = os.fork()
        if pid == 0:
            _init(plan, stdio, status_w)
        _report(status_w, f"init {pid}")
    except BaseException as exc:  # noqa: BLE001 - every failure is reported with its step
        _fail(status_w, step, exc)
    os._exit(0)


def _init(plan: RunPlan, stdio: tuple[int, int, int], status_w: int) -> None:
    """Pid 1: build the root, start the candidate, reap everything, report the candidate's end."""
    step = "init"
    try:
        # /proc/1 must not be readable by the candidate (it holds the zygote's memory image).
        sc.prctl(_PR_SET_DUMPABLE, 0)
        step = "set hostname"
        socket.sethostname("jigcmd")
        step = "prepare privilege drop"
        privileges.prepare()
        seccomp.build_filter()
        rootfs.build_root(plan)
        step = "start candidate"
        exec_r, exec_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            os.close(exec_r)
            _candidate(plan, stdio, exec_w, status_w)
        os.close(exec_w)
        for fd in stdio:
            os.close(fd)
        error = b""
        while chunk := os.read(exec_r, 4096):
            error += chunk
        os.close(exec_r)
        if error:
            os.waitpid(pid, 0)
            step, _, detail = error.decode("utf-8", "replace").partition("\t")
            _fail(status_w, step, detail)
        _report(status_w, "ready")
    except rootfs.RootfsError as exc:
        _fail(status_w, f"root filesystem: {exc.step}", str(exc).partition(": ")[2])
    except BaseException as exc:  # noqa: BLE001 - every failure is reported with its step
        _fail(status_w, step, exc)
    while True:
        try:
            reaped, status = os.wait()
        except ChildProcessError:
            os._exit(0)
        if reaped == pid:
            break
    if os.WIFSIGNALED(status):
        _report(status_w, f"signal {os.WTERMSIG(status)}")
    else:
        _report(status_w, f"exit {os.WEXITSTATUS(status)}")
    # Exiting pid 1 makes the kernel SIGKILL everything left in the namespace: a daemon or a
    # double-forked grandchild does not outlive the candidate's main process.
    os._exit(0)


def _candidate(plan: RunPlan, stdio: tuple[int, int, int], exec_w: int, status_w: int) -> None:
    step = "candidate stdio"
    try:
        os.close(status_w)
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
        # Everything above 2 closes at exec, the exec-error pipe included: the candidate
        # starts with exactly stdin, stdout and stderr.
        sc.close_range(3, 0xFFFFFFFF, sc.CLOSE_RANGE_CLOEXEC)
        step = "oom score"
        # Fork inherited init's non-dumpable mark, which makes /proc/self unwritable to us;
        # exec would reset it anyway.
        sc.prctl(_PR_SET_DUMPABLE, 1)
        # The candidate tree is the OOM killer's first choice, so a memory bomb kills the
        # candidate, not pid 1 (raising needs no privilege; lowering init would need
        # CAP_SYS_RESOURCE, which containers often lack).
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as handle:
            handle.write("1000")
        step = "reset signals"
        # Python ignores SIGPIPE and SIGXFSZ (and the zygote SIGINT); ignored dispositions
        # survive exec, so the candidate would inherit them. It gets a normal process.
        for signum in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        step = "drop privileges"
        privileges.drop_to_candidate(plan.limits.nofile, plan.limits.fsize_bytes)
        step = "exec runtime"
        os.execve(plan.argv[0], list(plan.argv), dict(plan.env))
    except BaseException as exc:  # noqa: BLE001 - reported through the exec pipe
        message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        with contextlib.suppress(OSError):
            os.write(exec_w, f"{step}\t{message}".encode("utf-8", "replace"))
        os._exit(127)
