"""Shared pieces of the jarvis tests: a spy executor, a fake host, the app behind httpx."""

from __future__ import annotations

import atexit
import contextlib
import errno
import itertools
import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx

from jigcmd.cancel import CancelSignal
from jigcmd.envelope.api import CapturedStream, EnvelopeFailure, Executor, RunOutcome
from jigcmd.evidence import ResourceReport
from jigcmd.jarvis.app import allowed_hosts, create_app
from jigcmd.jarvis.auth import Credentials, fingerprint, parse_capabilities
from jigcmd.jarvis.connections import DEFAULT_LIMITS, ConnectionLimits
from jigcmd.jarvis.hostview import OsHostView
from jigcmd.jarvis.manual import base_url
from jigcmd.jarvis.policy import HostView, parse_policy
from jigcmd.jarvis.server import bind_loopback, serve
from jigcmd.jarvis.service import JarvisService
from jigcmd.jarvis.statements import RunSigning
from jigcmd.journal.reservations import Reservations
from jigcmd.journal.store import Journal
from jigcmd.plan import RunPlan

TOKEN = "jv_test-token-0123456789abcdef"
ACTOR = fingerprint(TOKEN)
HOST = "127.0.0.1"
PORT = 7777
BASE = f"http://{HOST}:{PORT}"

POLICY = """
search_path = ["/usr/bin", "/bin"]

[[rule]]
name = "no-forbidden"
decision = "deny"
argv0 = ["echo", "touch"]
args_any = ["forbidden.*"]

[[rule]]
name = "echo"
decision = "allow"
argv0 = ["echo", "true"]
"""

# The file `/usr/bin/true` resolves to (itself on merged-/usr hosts): what a link to it runs.
TRUE = os.path.realpath("/usr/bin/true")


def linked_true(directory: Path) -> tuple[str, str, str]:
    """A symlink `fine` to /usr/bin/true in `directory/bin`, and a policy that allows calling
    it by that path in that directory: (the link's path, the directory, the policy). The
    directory is given resolved, as jarvis records a cwd."""
    bin_dir = Path(os.path.realpath(directory)) / "bin"
    bin_dir.mkdir(mode=0o755)
    link = bin_dir / "fine"
    link.symlink_to("/usr/bin/true")
    policy = f"""
[[rule]]
name = "fine"
decision = "allow"
argv0 = ["{link}"]
cwd = ["{bin_dir}"]
"""
    return str(link), str(bin_dir), policy


async def until(condition: Callable[[], bool], within: float = 10.0) -> None:
    """Look at `condition` every 10 ms until it holds; fail after `within` seconds."""
    with anyio.fail_after(within):
        for _ in itertools.count():
            if condition():
                return
            await anyio.sleep(0.01)


def auth(token: str = TOKEN) -> dict[str, str]:
    """The Authorization header for `token`."""
    return {"Authorization": f"Bearer {token}"}


def invoke_body(tool: str, **args: Any) -> dict[str, Any]:
    """A `POST /tools/<tool>` body."""
    return {"tool": tool, "args": args}


def outcome(stdout: bytes = b"", exit_code: int = 0) -> RunOutcome:
    """A canned successful run."""
    return RunOutcome(
        stdout=CapturedStream(stdout, False),
        stderr=CapturedStream(b"", False),
        exit_code=exit_code,
        signal=None,
        stop_reason="exited",
        report=ResourceReport(
            wall_ms=1.0,
            setup_ms=0.5,
            cpu_ms=None,
            peak_memory_bytes=None,
            oom_killed=False,
            pids_limit_hit=False,
            deadline_hit=False,
        ),
    )


class SpyExecutor:
    """Records every plan it is asked to run; runs nothing. `gate` holds runs until set.

    With `failure`, every run fails in the envelope that way instead of exiting.
    """

    def __init__(
        self, gate: anyio.Event | None = None, failure: EnvelopeFailure | None = None
    ) -> None:
        self.plans: list[RunPlan] = []
        self.gate = gate
        self.failure = failure
        self.entered = 0

    async def execute(
        self,
        plan: RunPlan,
        cancel: CancelSignal,
        ticket: object = None,
        hooks: object = None,
    ) -> RunOutcome:
        """Record `plan`; wait for the gate (or cancel) when there is one."""
        self.plans.append(plan)
        self.entered += 1
        if self.gate is not None:
            async with anyio.create_task_group() as tg:

                async def stop_on_cancel() -> None:
                    await cancel.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(stop_on_cancel)
                await self.gate.wait()
                tg.cancel_scope.cancel()
        if self.failure is not None:
            raise self.failure
        return outcome(stdout=" ".join(plan.argv[1:]).encode() + b"\n")


class AuditFailsOnce(Journal):
    """A real journal whose first audit row starting with `prefix` fails to be written."""

    prefix = "started run"
    failed = False

    def audit(
        self,
        *,
        actor: str,
        tool: str,
        argv: Sequence[str],
        cwd: str,
        decision: str,
        matched_rule: str | None,
        outcome: str,
    ) -> int:
        """Raise `OSError` (a disk that cannot take the row) the first time, then write."""
        if outcome.startswith(self.prefix) and not self.failed:
            self.failed = True
            raise OSError(errno.EIO, "disk I/O error (AuditFailsOnce)")
        return super().audit(
            actor=actor,
            tool=tool,
            argv=argv,
            cwd=cwd,
            decision=decision,
            matched_rule=matched_rule,
            outcome=outcome,
        )


def _throwaway_journal() -> Journal:
    """A real journal in a temporary state directory, removed when the tests end."""
    directory = tempfile.mkdtemp(prefix="jigcmd-jarvis-test-")
    atexit.register(shutil.rmtree, directory, True)
    return Journal.open(Path(directory))


class Harness:
    """A running service and an httpx client talking to its app in-process."""

    def __init__(self, service: JarvisService, store: Journal, client: httpx.AsyncClient) -> None:
        self.service = service
        self.store = store
        self.client = client

    async def invoke(
        self, tool: str, headers: Mapping[str, str] | None = None, **args: Any
    ) -> httpx.Response:
        """POST one tool call to its URL, with the right token (unless `headers` says otherwise)."""
        return await self.client.post(
            f"/tools/{tool}",
            json=invoke_body(tool, **args),
            headers=dict(auth() if headers is None else headers),
        )


def make_service(
    executor: Executor,
    *,
    policy: str = POLICY,
    store: Journal | None = None,
    host: HostView | None = None,
    host_env: Mapping[str, str] | None = None,
    early_answer_seconds: float = 25.0,
    max_active_runs: int = 32,
    reservations: Reservations | None = None,
    queue_wait: float = 20.0,
    signing: RunSigning | None = None,
    unauthenticated_row_s: float = 10.0,
) -> JarvisService:
    """A service over `policy`, recording in a throw-away journal by default."""
    return JarvisService(
        policy=parse_policy(policy),
        executor=executor,
        store=store or _throwaway_journal(),
        host=host or OsHostView(),
        host_env=host_env or {},
        early_answer_seconds=early_answer_seconds,
        max_active_runs=max_active_runs,
        reservations=reservations,
        queue_wait=queue_wait,
        signing=signing,
        unauthenticated_row_s=unauthenticated_row_s,
    )


@contextlib.asynccontextmanager
async def harness(
    service: JarvisService, *, capabilities: str | None = None
) -> AsyncIterator[Harness]:
    """Run `service` and serve its app to an in-process httpx client."""
    credentials = Credentials(TOKEN, parse_capabilities(capabilities))
    app = create_app(service, credentials, allowed_hosts(HOST, PORT), BASE)
    async with service.running():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            yield Harness(service, service.store, client)


@contextlib.asynccontextmanager
async def live_server(
    service: JarvisService,
    *,
    capabilities: str | None = None,
    limits: ConnectionLimits = DEFAULT_LIMITS,
) -> AsyncIterator[str]:
    """A real uvicorn server on a free loopback port; yields its base URL."""
    sock: socket.socket = bind_loopback(HOST, 0)
    port = sock.getsockname()[1]
    base = base_url(HOST, port)
    credentials = Credentials(TOKEN, parse_capabilities(capabilities))
    app = create_app(service, credentials, allowed_hosts(HOST, port), base)
    stop = anyio.Event()
    try:
        async with anyio.create_task_group() as tg:
            # The socket already listens: clients queue in its backlog until uvicorn accepts.
            tg.start_soon(
                partial(
                    serve,
                    app,
                    sock,
                    credentials,
                    limits=limits,
                    stop=stop,
                    refused=service.audit_unauthenticated,
                    audited=service.audit_refusal,
                )
            )
            try:
                yield base
            finally:
                stop.set()
    finally:
        sock.close()
