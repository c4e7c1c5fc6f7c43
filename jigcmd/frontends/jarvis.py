"""`jigcmd jarvis` (the UTCP HTTP tool provider) and `jigcmd jarvis-audit` (print the audit log)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import sys
import time
from pathlib import Path

import anyio

from jigcmd.attest.attester import Attester
from jigcmd.attest.keys import SigningKeyError, open_signing_key
from jigcmd.durable.host import open_host, state_directory
from jigcmd.durable.statedir import StateDirError
from jigcmd.envelope.cgroups import CgroupUnavailable
from jigcmd.envelope.delegation import DelegationError
from jigcmd.envelope.native import NativeExecutor
from jigcmd.jarvis.app import allowed_hosts, create_app
from jigcmd.jarvis.auth import ConfigError, load_credentials
from jigcmd.jarvis.connections import DEFAULT_LIMITS
from jigcmd.jarvis.hostview import OsHostView
from jigcmd.jarvis.manual import base_url
from jigcmd.jarvis.policy import PolicyError, parse_policy
from jigcmd.jarvis.server import LoopbackError, StopRequest, bind_loopback, serve
from jigcmd.jarvis.service import DEFAULT_QUEUE_WAIT_S, JarvisService
from jigcmd.jarvis.statements import RunSigning
from jigcmd.journal.reservations import Reservations, default_slots
from jigcmd.journal.schema import SchemaError
from jigcmd.journal.store import Journal, JournalError, JournalUnusable
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
) -> int:
    """Serve until SIGINT/SIGTERM, then 0; 2 (the precise reason on stderr) when it cannot start.

    A state directory lost meanwhile is 2 too, with one line saying so.
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
            early=early,
        )


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
    early: StopRequest,
) -> int:
    try:
        credentials = load_credentials(os.environ)
        text = _read(policy)
        rules = parse_policy(text, str(policy))
        opened = open_host(state_dir, cgroup_base)
        directory, base = opened.state_dir, opened.cgroup_base
        # Each completed run's statement names the policy file by the digest of its bytes.
        signing = RunSigning(
            Attester(open_signing_key(directory, signing_key)),
            "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest(),
        )
        sock = bind_loopback(host, port)
    except (
        ConfigError,
        PolicyError,
        StateDirError,
        SigningKeyError,
        LoopbackError,
        DelegationError,
        CgroupUnavailable,
    ) as exc:
        sys.stderr.write(f"jigcmd jarvis: {exc}\n")
        return EXIT_CONFIG
    except OSError as exc:
        sys.stderr.write(f"jigcmd jarvis: cannot bind {host}:{port}: {exc.strerror}\n")
        return EXIT_CONFIG
    bound_host, bound_port = sock.getsockname()[:2]
    try:
        journal = Journal.open(directory)
    except _JOURNAL_ERRORS as exc:
        sock.close()
        sys.stderr.write(f"jigcmd jarvis: {exc}\n")
        return EXIT_CONFIG
    try:
        service = JarvisService(
            policy=rules,
            executor=NativeExecutor(cgroup_base=base),
            store=journal,
            reservations=Reservations(
                directory,
                max_envelopes if max_envelopes is not None else default_slots(),
            ),
            host=OsHostView(),
            host_env=dict(os.environ),
            queue_wait=DEFAULT_QUEUE_WAIT_S if queue_wait is None else queue_wait,
            signing=signing,
        )
        base = base_url(bound_host, bound_port)
        app = create_app(
            service,
            credentials,
            allowed_hosts(bound_host, bound_port),
            base,
            HostPaths.of_host(state_dir=directory),
        )
        sys.stderr.write(
            f"jigcmd jarvis: serving {base}/utcp as {credentials.actor} "
            f"(grants: {', '.join(sorted(credentials.grants))}; journal {journal.path})\n"
        )
        limits = dataclasses.replace(DEFAULT_LIMITS, max_connections=max_connections)
        anyio.run(
            functools.partial(
                serve, app, sock, credentials, limits=limits, early=early, on_stop=service.stop
            )
        )
    finally:
        sock.close()
        closed = _close(journal)
    return EXIT_OK if closed else EXIT_CONFIG


def _close(journal: Journal) -> bool:
    """Close the journal; a state directory lost meanwhile is one line on stderr (False)."""
    try:
        journal.close()
    except JournalUnusable as exc:
        sys.stderr.write(f"jigcmd jarvis: {exc}\n")
        return False
    return True


def jarvis_audit(state_dir: Path | None, limit: int) -> int:
    """Print the newest `limit` audit rows, oldest first, one JSON object per line."""
    try:
        directory = state_directory(state_dir)
    except StateDirError as exc:
        sys.stderr.write(f"jigcmd jarvis-audit: {exc}\n")
        return EXIT_CONFIG
    try:
        with Journal.open(directory) as journal:
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
