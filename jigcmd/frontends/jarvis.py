"""`jigcmd jarvis` (the UTCP HTTP tool provider) and `jigcmd jarvis-audit` (print the audit log)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

import anyio
from starlette.applications import Starlette

from jigcmd.attest.attester import Attester
from jigcmd.attest.keys import SigningKeyError, open_signing_key
from jigcmd.command.failures import envelope_error
from jigcmd.command.placement import Placement
from jigcmd.durable.host import open_host
from jigcmd.durable.recovery import recover
from jigcmd.durable.statedir import StateDirError, default_state_dir, existing_state_dir
from jigcmd.envelope.api import EnvelopeFailure
from jigcmd.envelope.cgroups import CgroupBackend, CgroupUnavailable, read_mounts
from jigcmd.envelope.delegation import DelegationError
from jigcmd.envelope.native import NativeExecutor
from jigcmd.frontends.diagnosis.procgate import ProcUnavailable
from jigcmd.frontends.diagnosis.usernsgate import EnvelopeUnavailable, UserNamespaceUnavailable
from jigcmd.frontends.retaining import keep_pruning
from jigcmd.jarvis.app import allowed_hosts, create_app
from jigcmd.jarvis.auth import ConfigError, Credentials, load_credentials
from jigcmd.jarvis.connections import DEFAULT_LIMITS
from jigcmd.jarvis.hostmounts import held_mounts, held_mounts_message
from jigcmd.jarvis.hosttrust import untrusted_dirs_message
from jigcmd.jarvis.hostview import OsHostView
from jigcmd.jarvis.manual import base_url
from jigcmd.jarvis.policy import Policy, PolicyError, parse_policy
from jigcmd.jarvis.server import LoopbackError, StopRequest, bind_loopback, serve
from jigcmd.jarvis.service import DEFAULT_QUEUE_WAIT_S, JarvisService
from jigcmd.jarvis.statements import RunSigning
from jigcmd.journal.presence import holds_journal
from jigcmd.journal.reservations import Reservations, default_slots
from jigcmd.journal.schema import SchemaError
from jigcmd.journal.store import DB_NAME, Journal, JournalError, JournalUnusable
from jigcmd.jsonio import readable
from jigcmd.server.hostpaths import HostPaths

__all__ = ["jarvis", "jarvis_audit"]

EXIT_OK = 0
EXIT_CONFIG = 2
# Why the journal cannot be used (each message names the file, the cause and the fix).
_JOURNAL_ERRORS = (JournalUnusable, JournalError, SchemaError)


def jarvis(
    policy: Path,
    host: str,
    port: int,
    state_dir: Path | None,
    *,
    cgroup_base: str | None = None,
    max_envelopes: int | None = None,
    max_connections: int = DEFAULT_LIMITS.max_connections,
    queue_wait: float | None = None,
    signing_key: Path | None = None,
    retain_s: int | None = None,
) -> int:
    """Serve until a stop signal, then 0; 2 (the precise reason on stderr) when it cannot start.

    A state directory lost meanwhile is 2 too, with one line saying so. `retain_s`: prune
    what closed longer ago, at start and hourly (`jigcmd prune`); None keeps everything.
    """
    with StopRequest() as early:
        return _jarvis(
            policy,
            host,
            port,
            state_dir,
            cgroup_base=cgroup_base,
            max_envelopes=max_envelopes,
            max_connections=max_connections,
            queue_wait=queue_wait,
            signing_key=signing_key,
            retain_s=retain_s,
            early=early,
        )


class _Setup(NamedTuple):
    """What `jigcmd jarvis` reads and binds before it opens its journal."""

    credentials: Credentials
    rules: Policy
    directory: Path
    cgroup_base: str
    # None without usable cgroups: `NativeExecutor` then says why as it starts.
    backend: CgroupBackend | None
    signing: RunSigning
    sock: socket.socket


# Why jarvis cannot start, each message naming the piece and the fix.
_SETUP_ERRORS = (
    ConfigError,
    PolicyError,
    StateDirError,
    SigningKeyError,
    LoopbackError,
    DelegationError,
    UserNamespaceUnavailable,
    ProcUnavailable,
    EnvelopeUnavailable,
    CgroupUnavailable,
)


def _set_up(
    policy: Path,
    host: str,
    port: int,
    state_dir: Path | None,
    *,
    cgroup_base: str | None,
    signing_key: Path | None,
) -> _Setup:
    """The token, the policy, the state directory, the signing key and the bound socket."""
    credentials = load_credentials(os.environ)
    text = _read(policy)
    rules = parse_policy(text, str(policy))
    _refuse_unusable_dirs(rules, str(policy))
    opened = open_host(state_dir, cgroup_base)
    # Each completed run's statement names the policy file by the digest of its bytes.
    signing = RunSigning(
        Attester(open_signing_key(opened.state_dir, signing_key)),
        "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )
    sock = bind_loopback(host, port)
    return _Setup(
        credentials, rules, opened.state_dir, opened.cgroup_base, opened.backend, signing, sock
    )


def _refuse_unusable_dirs(rules: Policy, source: str) -> None:
    """Refuse a policy whose program or host directories others may write (`hosttrust`), or
    whose host directories hold mounts (no run it allows could start)."""
    untrusted = untrusted_dirs_message(rules, source)
    if untrusted is not None:
        raise PolicyError(untrusted)
    held = held_mounts(rules.host_dirs, [m.point for m in read_mounts()], os.path.realpath)
    if held:
        raise PolicyError(held_mounts_message(source, held))


def _jarvis(
    policy: Path,
    host: str,
    port: int,
    state_dir: Path | None,
    *,
    cgroup_base: str | None,
    max_envelopes: int | None,
    max_connections: int,
    queue_wait: float | None,
    signing_key: Path | None,
    retain_s: int | None,
    early: StopRequest,
) -> int:
    try:
        setup = _set_up(
            policy, host, port, state_dir, cgroup_base=cgroup_base, signing_key=signing_key
        )
    except _SETUP_ERRORS as exc:
        sys.stderr.write(f"jigcmd jarvis: {exc}\n")
        return EXIT_CONFIG
    except OSError as exc:
        sys.stderr.write(f"jigcmd jarvis: cannot bind {host}:{port}: {exc.strerror}\n")
        return EXIT_CONFIG
    try:
        journal = Journal.open(setup.directory)
    except _JOURNAL_ERRORS as exc:
        setup.sock.close()
        sys.stderr.write(f"jigcmd jarvis: {exc}\n")
        return EXIT_CONFIG
    try:
        service = JarvisService(
            policy=setup.rules,
            # The zygote's staging mount point is the state directory's `runtime`, as for
            # `jigcmd serve`, not a new directory in /tmp: no run can work in a directory
            # that holds a mount (rootfs.py), and /tmp is a working directory rules allow.
            executor=NativeExecutor(cgroup_base=setup.cgroup_base, state_dir=str(setup.directory)),
            store=journal,
            reservations=Reservations(
                setup.directory,
                max_envelopes if max_envelopes is not None else default_slots(),
            ),
            host=OsHostView(),
            host_env=dict(os.environ),
            queue_wait=DEFAULT_QUEUE_WAIT_S if queue_wait is None else queue_wait,
            signing=setup.signing,
            # serve's start-up recovery, for what else a dead jigcmd left in the state
            # directory: its envelopes' registry entries above all (`durable/recovery.py`).
            recovery=None
            if setup.backend is None
            else functools.partial(recover, journal, setup.backend),
            placement=None
            if setup.backend is None
            else Placement(setup.backend.pins, setup.backend.cpuset_bound),
        )
        app = _application(setup, service)
        limits = dataclasses.replace(DEFAULT_LIMITS, max_connections=max_connections)
        serving = functools.partial(
            serve,
            app,
            setup.sock,
            setup.credentials,
            limits=limits,
            early=early,
            on_stop=service.stop,
            # A journal lost while serving: stop at once (fail closed), exit 2 below.
            stop=service.must_stop,
            refused=service.audit_unauthenticated,
            audited=service.audit_refusal,
            head_refused=service.audit_refused_head,
        )
        if retain_s is not None:
            serving = functools.partial(_retaining, serving, setup.directory, retain_s)
        started = anyio.run(_serve_started, service, serving, _announce(setup, journal))
    finally:
        setup.sock.close()
        closed = _close(journal)
    return EXIT_OK if closed and started else EXIT_CONFIG


async def _serve_started(
    service: JarvisService, serving: Callable[[], Awaitable[None]], announce: str
) -> bool:
    """Start the service (its envelope's zygote first), announce it, then serve; False when
    the envelope cannot start, said in one line: nothing was served, nothing ran."""
    try:
        async with service.running():
            sys.stderr.write(announce)
            await serving()
    except EnvelopeFailure as failure:
        error = envelope_error(failure)
        sys.stderr.write(f"jigcmd jarvis: {error.code.value}: {error.message}\n")
        return False
    return True


async def _retaining(
    serving: Callable[[], Awaitable[None]], directory: Path, retain_s: int
) -> None:
    """Serve, pruning the state directory at start and hourly beside it (`--retain`)."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(keep_pruning, directory, retain_s, _say)
        await serving()
        tg.cancel_scope.cancel()


def _say(line: str) -> None:
    sys.stderr.write(f"jigcmd jarvis: {line}\n")
    sys.stderr.flush()


def _application(setup: _Setup, service: JarvisService) -> Starlette:
    """The HTTP application on the bound address; the caller owns the service's start."""
    bound_host, bound_port = setup.sock.getsockname()[:2]
    app = create_app(
        service,
        setup.credentials,
        allowed_hosts(bound_host, bound_port),
        base_url(bound_host, bound_port),
        HostPaths.of_host(state_dir=setup.directory),
        owns_service=False,
    )
    for rule, prefix in _cwds_holding(setup.rules, setup.directory):
        sys.stderr.write(
            f"jigcmd jarvis: warning: rule {rule!r} allows cwd {prefix}, which holds the state "
            f"directory {setup.directory} and the envelope's mount there: a run in {prefix} or "
            "in a directory between fails (nothing runs); use a state directory outside it\n"
        )
    return app


def _announce(setup: _Setup, journal: Journal) -> str:
    """The line saying jarvis serves, written once its envelope has started."""
    base = base_url(*setup.sock.getsockname()[:2])
    return (
        f"jigcmd jarvis: serving {base}/utcp as {setup.credentials.actor} "
        f"(grants: {', '.join(sorted(setup.credentials.grants))}; journal {journal.path})\n"
    )


def _cwds_holding(rules: Policy, directory: Path) -> list[tuple[str, str]]:
    """(rule, cwd prefix) of every allow rule whose working directories hold `directory`."""
    real = os.path.realpath(directory)
    return [
        (rule.name, prefix)
        for rule in rules.rules
        if rule.decision == "allow"
        for prefix in rule.cwd or ()
        if real.startswith(os.path.realpath(prefix).rstrip("/") + "/")
    ]


def _close(journal: Journal) -> bool:
    """Close the journal; a state directory or WAL lost meanwhile is one line on stderr (False)."""
    # A WAL removed under this process: its close still keeps every earlier commit, so only
    # asked before it, it says why jarvis stopped.
    lost = journal.lost()
    try:
        journal.close()
    except JournalUnusable as exc:
        lost = exc
    if lost is not None:
        sys.stderr.write(f"jigcmd jarvis: {lost}\n")
        return False
    return True


def jarvis_audit(state_dir: Path | None, limit: int) -> int:
    """Print the newest `limit` audit rows, oldest first, one JSON object per line."""
    try:
        # Read only: a mistyped --state-dir gets no new directory and journal.
        directory = existing_state_dir(state_dir or default_state_dir(), holding=DB_NAME)
    except StateDirError as exc:
        sys.stderr.write(f"jigcmd jarvis-audit: {exc}\n")
        return EXIT_CONFIG
    if not holds_journal(directory):
        return EXIT_OK  # only the empty file a failed first start left: no rows
    try:
        with Journal.open_read_only(directory) as journal:
            rows = journal.audit_rows(max(limit, 0))
    except _JOURNAL_ERRORS as exc:
        sys.stderr.write(f"jigcmd jarvis-audit: {exc}\n")
        return EXIT_CONFIG
    for row in reversed(rows):
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(row.time_unix_ms / 1000))
        print(
            readable.dumps(
                {
                    "seq": row.seq,
                    "time": when,
                    "actor": row.actor,
                    "tool": row.tool,
                    "argv": list(row.argv),
                    "cwd": row.cwd or None,
                    "decision": row.decision,
                    "matched_rule": row.matched_rule,
                    "outcome": row.outcome,
                }
            )
        )
    return EXIT_OK


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read the policy file: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{path}: the policy file is not UTF-8: {exc.reason}") from exc
