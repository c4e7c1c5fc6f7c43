"""The lifetime test rig: real servers on a private state directory, watched from the host.

`Rig` starts `jigcmd serve` children (each traced by a `Watch`), reads the journal the way
an operator would, stops and resumes processes by pid, and checks that nothing is left:
no traced process, no cgroup job, no envelope namespace held, no open journal row, no
scratch mount on the host.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
from pathlib import Path

from jigcmd.envelope.cgroups import CgroupBackend
from jigcmd.envelope.native import PREPARED_POOL
from jigcmd.frontends.servechild import ServeChild
from jigcmd.journal.identity import process_start
from jigcmd.journal.rows import Row
from jigcmd.journal.store import Journal
from tests.lifetime.frames import serve_child
from tests.lifetime.watch import Proc, Watch, alive, handles, namespace_holders, wait_for

__all__ = ["LEFTOVER_WAIT_S", "Rig"]

# How long an envelope may take to be torn down once nobody serves it any more.
LEFTOVER_WAIT_S = 15.0
# Default slots for tests that are not about reservations: enough for two servers.
_SLOTS = 4


class Rig:
    """Servers, a watch and the journal of one test's state directory."""

    def __init__(self, binding: Path, tmp: Path, backend: CgroupBackend) -> None:
        self.binding = binding
        # One test is one coordinator's run: its servers (restarts included) share the run id.
        self.run_id = f"run-{tmp.name}".replace("_", "-")[:128]
        self.tmp = tmp
        self.backend = backend
        self.state_dir = tmp / "state"
        self.watch = Watch()
        self.servers: list[ServeChild] = []
        self.stopped: list[Proc] = []
        self._ids = itertools.count(1)

    # -- servers ------------------------------------------------------------------------

    def serve(
        self,
        *,
        max_envelopes: int = _SLOTS,
        protocol: str = "auto",
        run_id: str | None = None,
        launcher: tuple[str, ...] = (),
        socket_stdout: bool = False,
    ) -> ServeChild:
        """A new traced `jigcmd serve` on the rig's state directory, answering pings.

        It belongs to the rig's run unless `run_id` names another; it runs under `launcher`
        (traced from the launcher down) when one is given; its stdout is a socketpair with
        `socket_stdout` (a Node host's).
        """
        server = serve_child(
            self.binding,
            self.state_dir,
            self.tmp / f"server-{len(self.servers)}.stderr",
            max_envelopes=max_envelopes,
            protocol=protocol,
            run_id=self.run_id if run_id is None else run_id,
            launcher=launcher,
            socket_stdout=socket_stdout,
        )
        self.servers.append(server)
        self.watch.add_root(server.pid)
        server.ping(self.next_id("ready"))
        return server

    def next_id(self, prefix: str = "r") -> str:
        """A fresh request id."""
        return f"{prefix}-{next(self._ids)}"

    def prepared(self, server: ServeChild) -> None:
        """Wait until `server` keeps its whole pool prepared (its warm-up is done)."""
        wait_for(
            lambda: len(self.watch.live_jobs(server.pid)) >= PREPARED_POOL,
            30,
            f"{PREPARED_POOL} prepared envelopes",
        )

    def zygote(self, server: ServeChild) -> Proc:
        """The server's zygote process."""
        found: list[Proc] = []

        def present() -> bool:
            self.watch.sync()
            found[:] = self.watch.children_named(server.pid, "jigcmd.envelope.zygote")
            return len(found) == 1

        wait_for(present, 30, "the zygote")
        return found[0]

    def candidate(self, token: str) -> Proc:
        """The running candidate carrying `token`, once its script handles SIGTERM."""
        found: list[Proc] = []

        def present() -> bool:
            found[:] = self.watch.running(token)
            # Until the script installed its handler, SIGTERM would kill Bun outright.
            return len(found) == 1 and handles(found[0], signal.SIGTERM)

        wait_for(present, 30, f"the candidate {token}")
        return found[0]

    def supervisor(self, operation_id: str) -> Proc:
        """The supervisor serving `operation_id`, as the server recorded it in the journal."""
        wait_for(
            lambda: (row := self.row(operation_id)) is not None and row.supervisor is not None,
            30,
            f"the supervisor of {operation_id}",
        )
        row = self.row(operation_id)
        assert row is not None and row.supervisor is not None
        return Proc(row.supervisor.pid, row.supervisor.start)

    # -- signals by pid -------------------------------------------------------------------

    def stop(self, proc: Proc) -> None:
        """SIGSTOP `proc` (resumed at teardown if the test does not)."""
        assert alive(proc)
        os.kill(proc.pid, signal.SIGSTOP)
        self.stopped.append(proc)

    def resume(self, proc: Proc) -> None:
        """SIGCONT a process `stop` stopped."""
        if alive(proc):
            os.kill(proc.pid, signal.SIGCONT)
        self.stopped.remove(proc)

    def signal(self, proc: Proc, signum: int) -> None:
        """Send `signum` to `proc`, which must still be that process."""
        assert alive(proc), f"{proc} is gone"
        os.kill(proc.pid, signum)

    # -- the journal ----------------------------------------------------------------------

    def rows(self) -> dict[tuple[str, str], Row]:
        """Every ownership row of the state directory, by (run, operation id)."""
        path = self.state_dir / "journal.sqlite3"
        if not path.exists():
            return {}
        # Through `Journal` only: a bare SQLite connection closing last would remove the WAL
        # without marking the journal clean (see `jigcmd.journal.marker`).
        with Journal.open(self.state_dir) as journal:
            return {(r.root_run, r.operation_id): r for r in journal.rows()}

    def row(self, operation_id: str, run_id: str | None = None) -> Row | None:
        """The row of `operation_id` in the rig's run (or in `run_id`), or None."""
        with Journal.open(self.state_dir) as journal:
            return journal.get(operation_id, root_run=self.run_id if run_id is None else run_id)

    def recover(self) -> str:
        """`jigcmd recover --state-dir` as an operator runs it; its output (exit 0 required)."""
        return self._operator("recover")

    def runs(self) -> str:
        """`jigcmd runs --state-dir` as an operator reads it (it fences nothing); its output."""
        return self._operator("runs")

    def _operator(self, verb: str) -> str:
        """`jigcmd VERB --state-dir` on the rig's state directory; its output (exit 0 required)."""
        done = subprocess.run(
            [sys.executable, "-m", "jigcmd", verb, "--state-dir", str(self.state_dir)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    # -- nothing left -------------------------------------------------------------------

    def assert_nothing_left(self) -> None:
        """Every server gone, then: no traced process, job, namespace, open row or scratch."""
        assert all(s.process.poll() is not None for s in self.servers), "a server still runs"
        wait_for(lambda: not self.watch.left_alive(), LEFTOVER_WAIT_S, "traced processes to end")
        jobs = self.watch.jobs() | {row.cgroup_job for row in self.rows().values()}
        live = set(self.backend.list_jobs())
        assert not jobs & live, f"cgroup jobs left: {sorted(jobs & live)}"
        holders = namespace_holders(self.watch.namespaces())
        assert not holders, f"envelope namespaces still held: {holders}"
        open_rows = [key for key, r in self.rows().items() if r.is_open]
        assert not open_rows, f"journal rows left open: {open_rows}"
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            scratch = [line for line in handle if "jigcmd-scratch" in line]
        assert not scratch, f"scratch mounts on the host: {scratch}"
        unexpected = {p.name for p in self.state_dir.iterdir()} - {
            "journal.sqlite3",
            "journal.sqlite3-wal",
            "journal.sqlite3-shm",
            "journal.mark",
            "slots",
            "envelopes",
            "runtime",
            # The zygotes holding the shared staged runtime (`jigcmd.envelope.runtimeshare`).
            "runtime.holders",
            # Each live owner's and supervisor's liveness lock (`jigcmd.journal.liveness`).
            "live",
            # One recovery pass at a time (`jigcmd.durable.recoverylock`).
            "recovery.lock",
            # The host's signing key, made on the first run (`jigcmd.attest.keys`).
            "signing-key.pem",
            "signing-key.pub.pem",
            # Each MCP call's streams (and JUnit report) for resources/read.
            "resources",
        }
        assert not unexpected, f"unexpected files in the state directory: {unexpected}"
        # The zygote's staging mount point: the copy lived in its namespace, never on the host.
        runtime = self.state_dir / "runtime"
        assert not runtime.exists() or not any(runtime.iterdir()), "staged runtime on the host"
        # Every zygote that held the staged runtime exits too (after a kill, once it has
        # finished supervising): nothing keeps the copy alive.
        wait_for(
            lambda: not self.runtime_holders(), LEFTOVER_WAIT_S, "the runtime's holders to exit"
        )
        registry = self.state_dir / "envelopes"
        registered = sorted(p.name for p in registry.iterdir()) if registry.exists() else []
        assert not registered, f"envelopes still registered: {registered}"

    def runtime_holders(self) -> list[str]:
        """The live zygotes listed as holding the staged runtime (`runtimeshare`)."""
        listed = self.state_dir / "runtime.holders"
        lines = listed.read_text("ascii").splitlines() if listed.exists() else []
        return [
            line for line in lines if process_start(int(line.split()[0])) == int(line.split()[1])
        ]

    def close(self) -> None:
        """Resume what was stopped, kill every server, then clean up whatever the test left."""
        for proc in list(self.stopped):
            self.resume(proc)
        for server in self.servers:
            with contextlib.suppress(OSError):
                server.__exit__(None, None, None)
        with contextlib.suppress(AssertionError):
            wait_for(lambda: not self.watch.left_alive(), LEFTOVER_WAIT_S, "leftovers")
        for proc in self.watch.left_alive():
            # Only processes our own servers started (traced by identity) are ever killed.
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        for name in self.watch.jobs():
            job = self.backend.open(name)
            if job is not None:
                job.kill()
                job.wait_empty(5.0)
                with contextlib.suppress(OSError):
                    job.remove()
        self.watch.stop()
