"""`NativeExecutor`: the anyio side of the envelope; launches runs via the zygote, reads output.

Per run it creates the stdio pipes and a run socket, hands them to the zygote in one
`Launch`, then concurrently reads both output pipes (capped, draining the rest), listens
to the supervisor's reports and forwards a cancel. It returns a `RunOutcome` only after the
supervisor confirmed the tree is gone and every owned resource released.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import anyio
import msgspec

from jigcmd import trace
from jigcmd.envelope import netns
from jigcmd.envelope.wire import (
    INIT_LOST,
    Cancel,
    Ended,
    Failed,
    Finished,
    FrameReader,
    Launch,
    Message,
    Ready,
    Started,
    Warm,
    recv_message,
    send_message,
)
from jigcmd.errors import Code, JigError
from jigcmd.evidence import OUTPUT_CAP_BYTES, ResourceReport
from jigcmd.executor import (
    Assigned,
    CapturedStream,
    Ending,
    EnvelopeIdentity,
    Hooks,
    OnEnded,
    RunOutcome,
    Ticket,
    Withdrawn,
)
from jigcmd.plan import Bind, RunPlan

__all__ = ["NativeExecutor"]

# After the supervisor reports the end, every writer of the pipes is dead; this only bounds
# the wait for bytes already in flight.
_DRAIN_AFTER_END = 1.0
# How long past the plan's deadline the supervisor may take to fence and release.
_FINISH_GRACE = 10.0
_READ_CHUNK = 65_536
# While the candidate runs, its output is read every 50 ms, not as it comes: each wake-up
# of the server costs ~0.25 ms of CPU that Bun needs on the same cores (`bun test` writes
# five times). The pipes are enlarged to hold what comes meanwhile; the run's end cuts the
# wait short, and past the cap (where output is dropped) reads follow the writes at once,
# so a chatty candidate is held back at most a batch or two. Through silence the wait
# doubles up to 200 ms, so that a long quiet run costs the server next to nothing.
_OUTPUT_BATCH_S = 0.05
_OUTPUT_BATCH_MAX_S = 0.2
_OUTPUT_PIPE_BYTES = 1024 * 1024


def _next_batch(batch: float, *, got_output: bool) -> float:
    """The next wait between reads while the candidate runs (see `_OUTPUT_BATCH_S`)."""
    return _OUTPUT_BATCH_S if got_output else max(batch, min(batch * 2, _OUTPUT_BATCH_MAX_S))


# How long a withdrawn launch's supervisor may take to report its envelope released.
_WITHDRAW_WAIT = 1.0
_ZYGOTE_START_S = 30.0
_ZYGOTE_EXIT_S = 1.0


class NativeExecutor:
    """Executes plans in fresh native envelopes via a pre-started zygote."""

    def __init__(
        self,
        python: str | None = None,
        cgroup_base: str = "jigcmd",
        state_dir: str | None = None,
    ) -> None:
        self._python = python or sys.executable
        self._cgroup_base = cgroup_base
        # Where supervisors register their envelopes and close rows whose server died.
        self._state_dir = state_dir
        # The zygote's staging mount point (staging.py): an empty directory on the host. One
        # in the state directory is kept; one made here is removed with the executor.
        self._staging_dir: str | None = None
        self._own_staging_dir = state_dir is None
        # Staged as the zygote starts (see `stage_at_start`), before any plan names them.
        self._stage_at_start: tuple[Bind, ...] = ()
        self._control: socket.socket | None = None
        self._zygote: anyio.abc.Process | None = None
        self._lock = anyio.Lock()
        # Prepared supervisors' sockets the zygote handed over (`Ready`), oldest first, with
        # who they are (None when the zygote could not identify the supervisor).
        self._ready: collections.deque[tuple[socket.socket, Assigned | None]] = collections.deque()

    def stage_at_start(self, binds: tuple[Bind, ...]) -> None:
        """Have the zygote stage `binds` while it starts, so no first run pays for the copy.

        Staging copies the runtime (80 MB: 60 ms here, seconds on an emulated machine); done
        at the first plan instead, it would count against that plan's deadline.
        """
        self._stage_at_start = tuple(bind for bind in binds if bind.staged)

    async def start(self) -> None:
        """Start the zygote (idempotent)."""
        async with self._lock:
            await self._ensure_zygote()

    async def _ensure_zygote(self) -> socket.socket:
        if self._control is not None and self._zygote is not None:
            if self._zygote.returncode is None:
                return self._control
            self._control.close()
            self._control = None
            self._drop_ready()
        # pyroute2 encodes the netlink request here, so the zygote never imports it.
        request = await anyio.to_thread.run_sync(netns.preload, abandon_on_cancel=True)
        if self._staging_dir is None:
            self._staging_dir = (
                tempfile.mkdtemp(prefix="jigcmd-runtime-")
                if self._state_dir is None
                else os.path.join(self._state_dir, "runtime")
            )
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # Isolated mode (no PYTHONPATH, no user site) with exactly the server's import path,
        # so the zygote imports the very modules the server runs.
        bootstrap = (
            f"import sys; sys.path[:] = {sys.path!r}; "
            "from jigcmd.envelope.zygote import main; sys.exit(main(sys.argv[1:]))"
        )
        try:
            self._zygote = await anyio.open_process(
                [
                    self._python,
                    "-I",
                    "-c",
                    bootstrap,
                    str(theirs.fileno()),
                    self._cgroup_base,
                    request.hex(),
                    self._state_dir or "",
                    self._staging_dir,
                    msgspec.msgpack.encode(self._stage_at_start).hex(),
                ],
                stdin=subprocess.DEVNULL,
                # Envelopes outlive a server that exits (they tear down on their own): none
                # of them may keep the caller's stderr pipe open, or a caller waiting for its
                # end would wait for them. Only tracing shares stderr.
                stdout=subprocess.DEVNULL,
                stderr=None if trace.ENABLED else subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                # A minimal environment: nothing of the server's (tokens, credentials) ever
                # sits in the memory image that supervisors and pid 1 are forked from.
                env={"LANG": "C.UTF-8", **({"JIGCMD_TRACE": "1"} if trace.ENABLED else {})},
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise JigError(
                Code.EXECUTION_FAILED, f"envelope zygote could not start: {exc}"
            ) from exc
        finally:
            theirs.close()
        # The zygote says whether it could set itself up (cgroups, filter, imports) before
        # any launch is sent: a broken machine is EXECUTION_FAILED naming the piece.
        ready = b""
        try:
            with anyio.move_on_after(_ZYGOTE_START_S):
                await anyio.wait_readable(ours)
                ready = ours.recv(4096)
        except BaseException:
            # Cancelled mid-handshake (the session ended during warm-up): the zygote must
            # see its control socket close and exit, not wait on a socket nobody holds.
            ours.close()
            with contextlib.suppress(ProcessLookupError):
                self._zygote.kill()
            raise
        if ready != b"R":
            ours.close()
            with contextlib.suppress(ProcessLookupError):
                self._zygote.kill()
            detail = ready[1:].decode("utf-8", "replace") or "no answer"
            raise JigError(
                Code.EXECUTION_FAILED, f"containment envelope unavailable, nothing ran: {detail}"
            )
        self._control = ours
        return ours

    async def prepare(self, template: RunPlan, pool: int = 2) -> None:
        """Keep `pool` envelopes prepared for plans shaped like `template` (same binds, limits).

        Two by default: one serves the next call while the other is replaced only after that
        call's run ends, so that no preparation competes with a running candidate for CPU.
        """
        async with self._lock:
            control = await self._ensure_zygote()
            # Supervisors prepared for an earlier shape would only re-prepare on launch.
            self._collect_ready(control)
            self._drop_ready()
            try:
                send_message(control, Warm(plan=template, pool=pool))
            except OSError as exc:
                raise JigError(
                    Code.EXECUTION_FAILED, f"envelope zygote unreachable: {exc}"
                ) from exc

    async def aclose(self) -> None:
        """Stop the zygote; running supervisors fence their own runs when their sockets close."""
        self._drop_ready()
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._zygote is not None:
            # With its control socket closed the zygote exits at once; bounded regardless.
            with anyio.move_on_after(_ZYGOTE_EXIT_S):
                await self._zygote.wait()
            if self._zygote.returncode is None:
                self._zygote.kill()
                await self._zygote.wait()
            self._zygote = None
        if self._own_staging_dir and self._staging_dir is not None:
            # Empty on the host; in the namespace of the zygote (gone) it was a mount point.
            with contextlib.suppress(OSError):
                os.rmdir(self._staging_dir)
            self._staging_dir = None

    def _collect_ready(self, control: socket.socket) -> None:
        """Take every `Ready` the zygote has sent so far (never waits for one)."""
        while select.select([control], [], [], 0)[0]:
            try:
                received = recv_message(control, max_fds=1)
            except (OSError, EOFError, ValueError):
                return  # the zygote is gone; the next launch through it says so
            if received is None:
                return
            message, fds = received
            if isinstance(message, Ready) and len(fds) == 1:
                supervisor = socket.socket(fileno=fds[0])
                # SCM_RIGHTS fds arrive inheritable: keep it out of anything spawned later.
                supervisor.set_inheritable(False)
                assigned = None
                if message.supervisor is not None:
                    assigned = Assigned(
                        run_id=message.envelope_id,
                        supervisor=message.supervisor,
                        cgroup_paths=message.cgroup_paths,
                    )
                self._ready.append((supervisor, assigned))
            else:
                for fd in fds:
                    os.close(fd)

    def _launch_prepared(self, launch: Launch, fds: list[int]) -> tuple[bool, Assigned | None]:
        """Send `launch` straight to the oldest prepared supervisor: whether one took it, and
        which envelope that is when known (the launch then carries the envelope's id)."""
        while self._ready:
            supervisor, assigned = self._ready.popleft()
            try:
                if assigned is not None:
                    launch = msgspec.structs.replace(launch, run_id=assigned.run_id)
                send_message(supervisor, launch, fds)
            except OSError:
                continue  # that supervisor died while prepared; never reuse, take another
            finally:
                supervisor.close()
            trace.mark("executor: launch sent")
            return True, assigned
        return False, None

    def _drop_ready(self) -> None:
        while self._ready:
            self._ready.popleft()[0].close()

    async def execute(
        self,
        plan: RunPlan,
        cancel: anyio.Event,
        ticket: Ticket | None = None,
        hooks: Hooks | None = None,
    ) -> RunOutcome:
        """Run `plan` in a fresh envelope; see `jigcmd.executor.Executor`."""
        trace.mark("executor: execute")
        ticket = ticket or Ticket(run_id=uuid.uuid4().hex[:16])
        hooks = hooks or Hooks()
        launch = Launch(
            run_id=ticket.run_id,
            plan=plan,
            operation_id=ticket.operation_id,
            root_run=ticket.root_run,
            state_dir=ticket.state_dir,
        )
        stdin_r, stdin_w = os.pipe2(os.O_CLOEXEC)
        stdout_r, stdout_w = os.pipe2(os.O_CLOEXEC)
        stderr_r, stderr_w = os.pipe2(os.O_CLOEXEC)
        for fd in (stdout_r, stderr_r):
            # Best effort: a smaller pipe only makes a chatty candidate wait a batch sooner.
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _OUTPUT_PIPE_BYTES)
        # The gate: the staged candidate execs only once a byte arrives here, and gives up
        # without running on EOF (a withdrawal, or this process dying).
        gate_r, gate_w = os.pipe2(os.O_CLOEXEC)
        run_sock, run_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        to_close = [stdin_r, stdout_w, stderr_w, gate_r, run_peer.fileno()]
        # The slot's lock travels with the launch; the supervisor holds it to the end. The
        # caller keeps (and later closes) its own descriptor.
        passed = to_close if ticket.slot_fd is None else [*to_close, ticket.slot_fd]
        unreachable: OSError | None = None
        assigned: Assigned | None = None
        try:
            # Stdin is at most 16 KiB: it fits the pipe buffer, so it is written whole now
            # and the candidate sees EOF after it, never a blocked writer.
            if plan.stdin:
                os.write(stdin_w, plan.stdin)
            os.close(stdin_w)
            stdin_w = -1
            async with self._lock:
                control = await self._ensure_zygote()
                self._collect_ready(control)
                taken, assigned = self._launch_prepared(launch, passed)
                if not taken:
                    try:
                        send_message(control, launch, passed)
                        trace.mark("executor: launch sent to the zygote")
                    except OSError as exc:
                        unreachable = exc
        except BaseException:
            os.close(gate_w)
            run_sock.close()
            os.close(stdout_r)
            os.close(stderr_r)
            raise
        finally:
            if stdin_w >= 0:
                os.close(stdin_w)
            for fd in (stdin_r, stdout_w, stderr_w, gate_r):
                os.close(fd)
            run_peer.close()
        run = _RunCollector(
            plan,
            sock=run_sock,
            stdout_r=stdout_r,
            stderr_r=stderr_r,
            cancel=cancel,
            hooks=hooks,
        )
        opened = False
        try:
            permitted = True if hooks.admit is None else await hooks.admit(assigned)
            trace.mark("executor: admitted")
            if permitted and unreachable is None and not cancel.is_set():
                os.write(gate_w, b"g")
                opened = True
        finally:
            os.close(gate_w)
            if not opened:
                # Withdrawn before the candidate started: wait (bounded) for the supervisor
                # to release the envelope, so nothing of it outlives the answer.
                await run.abandon()
        if not permitted:
            raise Withdrawn  # the caller's known answer stands, reachable envelope or not
        if unreachable is not None:
            raise JigError(
                Code.EXECUTION_FAILED, f"envelope zygote unreachable: {unreachable}"
            ) from unreachable
        if not opened:
            raise JigError(Code.CANCELLED, "cancelled before dispatch; nothing ran")
        return await run.collect()


class _Capture:
    def __init__(self, fd: int, ending: anyio.Event) -> None:
        self.fd = fd
        os.set_blocking(fd, False)
        self.data = bytearray()
        self.dropped = 0
        self.eof = False
        self.done = anyio.Event()
        self.ending = ending

    def _batching(self) -> bool:
        return len(self.data) < OUTPUT_CAP_BYTES and not self.ending.is_set()

    async def pump(self) -> None:
        batch = _OUTPUT_BATCH_S
        try:
            while True:
                if self._batching():
                    with anyio.move_on_after(batch):
                        await self.ending.wait()
                try:
                    chunk = os.read(self.fd, _READ_CHUNK)
                except BlockingIOError:
                    if self._batching():
                        batch = _next_batch(batch, got_output=False)
                    else:
                        await anyio.wait_readable(self.fd)
                    continue
                batch = _next_batch(batch, got_output=True)
                if not chunk:
                    self.eof = True
                    self.done.set()
                    return
                room = OUTPUT_CAP_BYTES - len(self.data)
                if room > 0:
                    self.data += chunk[:room]
                self.dropped += max(0, len(chunk) - max(room, 0))
        finally:
            os.close(self.fd)

    def result(self) -> CapturedStream:
        return CapturedStream(data=bytes(self.data), truncated=self.dropped > 0 or not self.eof)


class _RunCollector:
    def __init__(
        self,
        plan: RunPlan,
        *,
        sock: socket.socket,
        stdout_r: int,
        stderr_r: int,
        cancel: anyio.Event,
        hooks: Hooks,
    ) -> None:
        self.plan = plan
        self.sock = sock
        # Set once the run's end is reported (or the reports stop): output is read at once.
        self.ending = anyio.Event()
        self.stdout = _Capture(stdout_r, self.ending)
        self.stderr = _Capture(stderr_r, self.ending)
        self.cancel = cancel
        self.hooks = hooks
        self.started: Started | None = None
        self.end: Finished | Failed | None = None
        self.frames = FrameReader()
        self.callbacks: anyio.abc.TaskGroup
        sock.setblocking(False)

    async def collect(self) -> RunOutcome:
        begin = time.monotonic()
        try:
            # Callbacks (the journal recording the envelope) run beside the run and are
            # awaited, never cancelled, before the outcome is returned.
            async with (
                anyio.create_task_group() as self.callbacks,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(self._pump_outputs)
                tg.start_soon(self._forward_cancel, tg.cancel_scope)
                try:
                    await self._listen()
                finally:
                    self.ending.set()
                tg.cancel_scope.cancel()
        finally:
            self.sock.close()
        trace.mark("executor: output drained")
        return self._outcome(begin)

    async def abandon(self) -> None:
        """Wait (bounded) for the end report of a withdrawn launch; drop output and errors."""
        try:
            with anyio.move_on_after(_WITHDRAW_WAIT), anyio.CancelScope(shield=True):
                while self.end is None:
                    message = await self._next_message()
                    if message is None:
                        break
                    if isinstance(message, Finished | Failed):
                        self.end = message
        finally:
            self.sock.close()
            os.close(self.stdout.fd)
            os.close(self.stderr.fd)

    async def _pump_outputs(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.stdout.pump)
            tg.start_soon(self.stderr.pump)

    async def _forward_cancel(self, scope: anyio.CancelScope) -> None:
        await self.cancel.wait()
        with contextlib.suppress(OSError):
            send_message(self.sock, Cancel())

    async def _listen(self) -> None:
        limit = self.plan.deadline + _FINISH_GRACE
        with anyio.move_on_after(max(0.0, limit - time.monotonic())):
            while self.end is None:
                message = await self._next_message()
                if message is None:
                    return
                if isinstance(message, Started):
                    trace.mark("executor: started")
                    self.started = message
                    if self.hooks.on_started is not None:
                        identity = EnvelopeIdentity(
                            supervisor_pid=message.supervisor_pid,
                            init_pid=message.init_pid,
                            cgroup_paths=message.cgroup_paths,
                            netns=message.netns,
                        )
                        self.callbacks.start_soon(self.hooks.on_started, identity)
                elif isinstance(message, Ended):
                    trace.mark("executor: ended")
                    self.ending.set()
                    if self.hooks.on_ended is not None:
                        self.callbacks.start_soon(self._ended, message, self.hooks.on_ended)
                elif isinstance(message, Finished | Failed):
                    trace.mark("executor: end reported")
                    self.ending.set()
                    self.end = message
        if isinstance(self.end, Finished):
            # Every writer is dead; read what is still in the pipes, bounded in time.
            with anyio.move_on_after(_DRAIN_AFTER_END):
                await self.stdout.done.wait()
                await self.stderr.done.wait()

    async def _ended(self, ended: Ended, on_ended: OnEnded) -> None:
        # Every writer of the pipes is dead or SIGKILLed once the candidate ended (pid 1
        # killed the namespace first): the output completes now, during the cleanup.
        with anyio.move_on_after(_DRAIN_AFTER_END):
            await self.stdout.done.wait()
            await self.stderr.done.wait()
        if not (self.stdout.eof and self.stderr.eof):
            return
        await on_ended(
            Ending(
                stdout=self.stdout.result(),
                stderr=self.stderr.result(),
                exit_code=ended.exit_code,
                signal=ended.signal,
                stop_reason=ended.stop_reason,
            )
        )

    async def _next_message(self) -> Message | None:
        """The supervisor's next report; None once the reports stop (EOF, or a bad frame)."""
        while True:
            try:
                message = self.frames.next()
            except (ValueError, msgspec.DecodeError):
                # Oversized or garbled: nothing after it can be trusted, as if it went silent.
                return None
            if message is not None:
                return message
            try:
                data = self.sock.recv(65_536)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
                continue
            except OSError:
                return None
            if not data:
                return None
            self.frames.feed(data)

    def _outcome(self, begin: float) -> RunOutcome:
        end = self.end
        if isinstance(end, Failed):
            if end.step == "deadline":
                raise JigError(
                    Code.DEADLINE_EXCEEDED, "the deadline passed before the candidate started"
                )
            if end.step == INIT_LOST:
                cleanup = (
                    "the envelope was cleaned up"
                    if end.cleanup_complete
                    else "cleanup not confirmed: " + "; ".join(end.cleanup_problems)
                )
                raise JigError(Code.UNCERTAIN, f"{end.error}; {cleanup}")
            message = f"containment envelope incomplete, nothing ran: {end.step}: {end.error}"
            if not end.cleanup_complete:
                raise JigError(
                    Code.UNCERTAIN,
                    message + "; cleanup not confirmed: " + "; ".join(end.cleanup_problems),
                )
            raise JigError(Code.EXECUTION_FAILED, message)
        if end is None:
            raise JigError(
                Code.UNCERTAIN,
                "the envelope supervisor stopped reporting; the run's end and cleanup are unproved",
            )
        if not end.cleanup_complete:
            raise JigError(
                Code.UNCERTAIN, "cleanup could not be confirmed: " + "; ".join(end.cleanup_problems)
            )
        started = self.started
        report = ResourceReport(
            wall_ms=(time.monotonic() - begin) * 1000,
            setup_ms=started.setup_ms if started is not None else 0.0,
            cpu_ms=end.cpu_ms,
            peak_memory_bytes=end.peak_memory_bytes,
            oom_killed=end.oom_killed,
            pids_limit_hit=end.pids_limit_hit,
            deadline_hit=end.stop_reason == "deadline",
        )
        return RunOutcome(
            stdout=self.stdout.result(),
            stderr=self.stderr.result(),
            exit_code=end.exit_code,
            signal=end.signal,
            stop_reason=end.stop_reason,
            report=report,
        )
