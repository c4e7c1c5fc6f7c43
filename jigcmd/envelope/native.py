"""`NativeExecutor`: the anyio side of the envelope; starts the zygote and launches runs.

Per run it creates the stdio pipes and a run socket and hands them to the zygote in one
`Launch`, naming a prepared envelope when the zygote has named one (`Ready`);
`collection.RunCollector` then follows the run to its end.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import socket
import subprocess
import sys
import tempfile
import uuid
from typing import NamedTuple

import anyio

from jigcmd import trace
from jigcmd.cancel import CancelSignal
from jigcmd.envelope import wire
from jigcmd.envelope.api import (
    Assigned,
    EnvelopeFailure,
    FailureKind,
    Hooks,
    RunOutcome,
    Ticket,
    Withdrawn,
)
from jigcmd.envelope.collection import RunCollector
from jigcmd.envelope.messages import (
    REFILL_AFTER_MS,
    Answered,
    Launch,
    Ready,
    Warm,
    recv_message,
    send_message,
)
from jigcmd.envelope.outputs import OUTPUT_PIPE_BYTES
from jigcmd.envelope.wire import MSGSPEC
from jigcmd.fdwait import readable
from jigcmd.plan import Bind, RunPlan

__all__ = ["PREPARED_POOL", "ZYGOTE_FLAGS", "NativeExecutor"]

_ZYGOTE_START_S = 30.0
# A killed zygote is gone within milliseconds; the bound only keeps a wedged kernel from
# holding a failing start forever.
_ZYGOTE_REAP_S = 5.0
# Isolated mode (no PYTHONPATH, no user site) and no `site` at all: the zygote is given the
# server's import path whole, so site's work (its module, the venv's `.pth` files and what
# they import, such as setuptools' `_distutils_hack`) would only add to the image every pid
# 1 is cloned from.
ZYGOTE_FLAGS = ("-I", "-S")
_ZYGOTE_EXIT_S = 10.0
# Envelopes a server keeps prepared (see `prepare`).
PREPARED_POOL = 2


class NativeExecutor:
    """Executes plans in fresh native envelopes via a pre-started zygote."""

    def __init__(
        self,
        python: str | None = None,
        cgroup_base: str = "jigcmd",
        state_dir: str | None = None,
        scratch_parent: str | None = None,
    ) -> None:
        self._python = python or sys.executable
        self._cgroup_base = cgroup_base
        # Where the zygote registers envelopes and closes rows whose server died.
        self._state_dir = state_dir
        # The zygote's staging mount point (staging.py): an empty directory on the host. One
        # in the state directory is kept; one made here (in `scratch_parent`, else the temporary
        # directory, which a read-only root may lack) is removed with the executor.
        self._staging_dir: str | None = None
        self._scratch_parent = scratch_parent
        self._own_staging_dir = state_dir is None
        # Staged as the zygote starts (see `stage_at_start`), before any plan names them.
        self._stage_at_start: tuple[Bind, ...] = ()
        self._control: socket.socket | None = None
        self._zygote: anyio.abc.Process | None = None
        self._lock = anyio.Lock()
        # Prepared envelopes the zygote named (`Ready`), oldest first, with who serves them
        # (None when the zygote could not identify itself).
        self._ready: collections.deque[tuple[str, Assigned | None]] = collections.deque()
        # Runs that ended here whose call's answer was not yet said written (`answered`).
        self._unanswered = 0

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
        if self._staging_dir is None:
            self._staging_dir = (
                tempfile.mkdtemp(prefix="jigcmd-runtime-", dir=self._scratch_parent)
                if self._state_dir is None
                else os.path.join(self._state_dir, "runtime")
            )
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._zygote = await self._spawn_zygote(theirs.fileno(), self._staging_dir)
        except OSError as exc:
            ours.close()
            raise EnvelopeFailure(FailureKind.ZYGOTE_NOT_STARTED, "zygote", str(exc)) from exc
        finally:
            theirs.close()
        await _handshake(ours, self._zygote)
        self._control = ours
        return ours

    async def _spawn_zygote(self, control_fd: int, staging_dir: str) -> anyio.abc.Process:
        """Start the zygote process on its end of the control socket."""
        # Exactly the server's import path, so the zygote imports the very modules the
        # server runs (`ZYGOTE_FLAGS`: no site to compute another).
        bootstrap = (
            f"import sys; sys.path[:] = {sys.path!r}; "
            "from jigcmd.envelope.zygote import main; sys.exit(main(sys.argv[1:]))"
        )
        return await anyio.open_process(
            [
                self._python,
                *ZYGOTE_FLAGS,
                "-c",
                bootstrap,
                str(control_fd),
                self._cgroup_base,
                self._state_dir or "",
                staging_dir,
                wire.argument(self._stage_at_start),
            ],
            stdin=subprocess.DEVNULL,
            # Envelopes outlive a server that exits (they tear down on their own): none
            # of them may keep the caller's stderr pipe open, or a caller waiting for its
            # end would wait for them. Only tracing shares stderr.
            stdout=subprocess.DEVNULL,
            stderr=None if trace.ENABLED else subprocess.DEVNULL,
            pass_fds=(control_fd,),
            # A minimal environment: nothing of the server's (tokens, credentials) ever
            # sits in the memory image that supervisors and pid 1 are forked from.
            env={"LANG": "C.UTF-8", **({"JIGCMD_TRACE": "1"} if trace.ENABLED else {})},
            start_new_session=True,
        )

    async def prepare(
        self,
        template: RunPlan,
        pool: int = PREPARED_POOL,
        refill_after_ms: float = REFILL_AFTER_MS,
    ) -> None:
        """Keep `pool` envelopes prepared for plans shaped like `template` (same binds, limits).

        Two by default: one serves the next call while the other is replaced only after that
        call's run ends, so that no preparation competes with a running candidate for CPU,
        and only once the call is answered (`answered`), or `refill_after_ms` after the end.
        """
        async with self._lock:
            control = await self._ensure_zygote()
            # Envelopes prepared for an earlier shape would only re-prepare on launch.
            self._collect_ready(control)
            self._drop_ready()
            try:
                warm = Warm(plan=template, pool=pool, refill_after_ms=refill_after_ms)
                send_message(control, warm, codec=MSGSPEC)
            except OSError as exc:
                raise EnvelopeFailure(FailureKind.ZYGOTE_UNREACHABLE, "warm", str(exc)) from exc

    async def aclose(self) -> None:
        """Stop the zygote: it fences the runs still going (their sockets close) and exits."""
        self._drop_ready()
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._zygote is not None:
            # With its control socket closed the zygote tears its prepared envelopes down,
            # fences any run still going, and exits once every envelope is released. Killing
            # it sooner would take those envelopes with it (recovery would then clean up).
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
        while readable(control.fileno(), 0):
            try:
                received = recv_message(control, codec=MSGSPEC)
            except (OSError, EOFError, ValueError):
                return  # the zygote is gone; the next launch through it says so
            if received is None:
                return
            message, _fds = received
            if isinstance(message, Ready):
                assigned = None
                if message.supervisor is not None:
                    assigned = Assigned(
                        run_id=message.envelope_id,
                        supervisor=message.supervisor,
                        cgroup_paths=message.cgroup_paths,
                    )
                self._ready.append((message.envelope_id, assigned))

    def _name_prepared(self, launch: Launch) -> tuple[Launch, Assigned | None]:
        """Point `launch` at the oldest prepared envelope, and say which it is when known."""
        if not self._ready:
            return launch, None
        envelope_id, assigned = self._ready.popleft()
        return launch._replace(run_id=envelope_id), assigned

    def _drop_ready(self) -> None:
        self._ready.clear()

    def answered(self) -> None:
        """A call's answer was written: the zygote may refill its pool now (`Answered`).

        Only after a run that ended here (a call refused before any launch sends nothing);
        a hint: the zygote refills on its own a little later without it. Never blocks.
        """
        if not self._unanswered or self._control is None:
            return
        self._unanswered -= 1
        with contextlib.suppress(OSError):
            # A frame of a few bytes on a socket that is only written here between awaits.
            send_message(self._control, Answered(), codec=MSGSPEC)

    async def execute(
        self,
        plan: RunPlan,
        cancel: CancelSignal,
        ticket: Ticket | None = None,
        hooks: Hooks | None = None,
    ) -> RunOutcome:
        """Run `plan` in a fresh envelope; see `jigcmd.envelope.api.Executor`."""
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
        try:
            fds = _RunFds.open(plan.stdin)
        except OSError as exc:
            # Out of descriptors, say: nothing was launched, and nothing of it stays open.
            raise EnvelopeFailure(FailureKind.SETUP_FAILED, "run pipes", str(exc)) from exc
        # The slot's lock travels with the launch; the supervisor holds it to the end. The
        # caller keeps (and later closes) its own descriptor.
        passed = fds.theirs() if ticket.slot_fd is None else [*fds.theirs(), ticket.slot_fd]
        try:
            assigned, unreachable = await self._send_launch(launch, passed)
        except BaseException:
            fds.close_ours()
            raise
        finally:
            fds.close_theirs()
        try:
            run = RunCollector(
                plan,
                sock=fds.sock,
                stdout_r=fds.stdout_r,
                stderr_r=fds.stderr_r,
                cancel=cancel,
                hooks=hooks,
            )
            reachable = unreachable is None
            permitted, opened = await _open_gate(run, fds.gate_w, hooks, assigned, reachable)
            if not permitted:
                raise Withdrawn  # the caller's known answer stands, reachable envelope or not
            if unreachable is not None:
                raise EnvelopeFailure(
                    FailureKind.ZYGOTE_UNREACHABLE, "launch", str(unreachable)
                ) from unreachable
            if not opened:
                raise EnvelopeFailure(FailureKind.CANCELLED_BEFORE_DISPATCH, "gate")
            return await run.collect()
        finally:
            if unreachable is None:
                # The zygote counts this run's end too: its refill waits for `answered`.
                self._unanswered += 1

    async def _send_launch(
        self, launch: Launch, passed: list[int]
    ) -> tuple[Assigned | None, OSError | None]:
        """Send `launch` (to a prepared envelope when one is named); who serves it, or why not."""
        control = self._control
        if control is not None and not self._lock.locked() and self._zygote_running():
            # Nothing below awaits: with the lock free and the zygote up this is what the
            # lock would guard, without its two turns of the loop.
            return self._send_to(control, launch, passed)
        async with self._lock:
            return self._send_to(await self._ensure_zygote(), launch, passed)

    def _zygote_running(self) -> bool:
        return self._zygote is not None and self._zygote.returncode is None

    def _send_to(
        self, control: socket.socket, launch: Launch, passed: list[int]
    ) -> tuple[Assigned | None, OSError | None]:
        self._collect_ready(control)
        launch, assigned = self._name_prepared(launch)
        try:
            send_message(control, launch, passed, codec=MSGSPEC)
        except OSError as exc:
            return assigned, exc
        trace.mark("executor: launch sent")
        return assigned, None


async def _handshake(control: socket.socket, zygote: anyio.abc.Process) -> None:
    """Wait for the zygote to say it could set itself up; else kill it and say what failed.

    The zygote answers (cgroups, filter, imports) before any launch is sent: a broken
    machine is a failure naming the piece.
    """
    ready = b""
    try:
        with anyio.move_on_after(_ZYGOTE_START_S):
            await anyio.wait_readable(control)
            ready = control.recv(4096)
    except BaseException:
        # Cancelled mid-handshake (the session ended during warm-up): the zygote must
        # see its control socket close and exit, not wait on a socket nobody holds.
        await _discard_zygote(control, zygote)
        raise
    if ready != b"R":
        await _discard_zygote(control, zygote)
        detail = ready[1:].decode("utf-8", "replace") or "no answer"
        raise EnvelopeFailure(FailureKind.ENVELOPE_UNAVAILABLE, "zygote", detail)


async def _discard_zygote(control: socket.socket, zygote: anyio.abc.Process) -> None:
    """Close the control socket, kill the zygote and reap it (bounded, even when cancelled).

    Unreaped, its pid outlives the event loop: asyncio's child watcher then warns on
    stderr at exit, a second line after the one-line refusal.
    """
    control.close()
    with contextlib.suppress(ProcessLookupError):
        zygote.kill()
    with anyio.CancelScope(shield=True), anyio.move_on_after(_ZYGOTE_REAP_S):
        await zygote.wait()


async def _open_gate(
    run: RunCollector, gate_w: int, hooks: Hooks, assigned: Assigned | None, reachable: bool
) -> tuple[bool, bool]:
    """Let the candidate start unless the caller withdraws; (permitted, opened).

    The gate is closed either way. A launch that never opens it is withdrawn: its supervisor
    releases the envelope, and that is waited for (bounded), so nothing of it outlives the
    answer.
    """
    opened = False
    try:
        permitted = True if hooks.admit is None else await hooks.admit(assigned)
        trace.mark("executor: admitted")
        if permitted and reachable and not run.cancel.is_set():
            # A broken pipe: the envelope gave up before the gate opened (its deadline
            # passed, or a step failed); its own report, collected next, says why; nothing ran.
            with contextlib.suppress(BrokenPipeError):
                os.write(gate_w, b"g")
            opened = True
    finally:
        os.close(gate_w)
        if not opened:
            await run.abandon()
    return permitted, opened


class _RunFds(NamedTuple):
    """One run's descriptors: the server's ends, and the envelope's, sent with the launch."""

    stdout_r: int
    stderr_r: int
    # The gate: the staged candidate execs only once a byte arrives here, and gives up
    # without running on EOF (a withdrawal, or this process dying).
    gate_w: int
    sock: socket.socket
    stdin_r: int
    stdout_w: int
    stderr_w: int
    gate_r: int
    peer: socket.socket

    @classmethod
    def open(cls, stdin: bytes) -> _RunFds:
        """New pipes and a run socket, `stdin` written whole (at most 16 KiB fits the pipe)."""
        made: list[int] = []
        try:
            for _ in range(4):
                made += os.pipe2(os.O_CLOEXEC)
            # The candidate sees EOF after its input, never a blocked writer.
            if stdin:
                os.write(made[1], stdin)
            sock, peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        except BaseException:
            # Out of descriptors, say: none of this run's may stay open.
            for fd in made:
                os.close(fd)
            raise
        os.close(made[1])
        stdin_r, _, stdout_r, stdout_w, stderr_r, stderr_w, gate_r, gate_w = made
        for fd in (stdout_r, stderr_r):
            # Best effort: a smaller pipe only makes a chatty candidate wait a batch sooner.
            with contextlib.suppress(OSError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, OUTPUT_PIPE_BYTES)
        return cls(stdout_r, stderr_r, gate_w, sock, stdin_r, stdout_w, stderr_w, gate_r, peer)

    def theirs(self) -> list[int]:
        """The envelope's ends, in the order the launch passes them."""
        return [self.stdin_r, self.stdout_w, self.stderr_w, self.gate_r, self.peer.fileno()]

    def close_theirs(self) -> None:
        """Once sent (or not): the zygote holds its own copies."""
        for fd in (self.stdin_r, self.stdout_w, self.stderr_w, self.gate_r):
            os.close(fd)
        self.peer.close()

    def close_ours(self) -> None:
        """When no launch went out: nothing will collect the run."""
        os.close(self.gate_w)
        self.sock.close()
        os.close(self.stdout_r)
        os.close(self.stderr_r)
