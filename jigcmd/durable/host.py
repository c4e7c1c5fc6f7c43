"""The host a front serves from: its state directory and cgroups, opened here by every front."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from jigcmd.durable.statedir import default_state_dir, prepare_state_dir
from jigcmd.envelope import owncgroup
from jigcmd.envelope.cgroupbase import configured_base
from jigcmd.envelope.cgroups import CgroupBackend, CgroupUnavailable
from jigcmd.envelope.cgroups.v2 import V2Backend, enabling
from jigcmd.envelope.delegation import refuse_bad_base, resolve_backend
from jigcmd.frontends.diagnosis import containerfacts
from jigcmd.frontends.diagnosis.procgate import refuse_partial_proc
from jigcmd.frontends.diagnosis.usernsgate import (
    EnvelopeUnavailable,
    refuse_without_namespaces,
    refuse_without_userns,
)

__all__ = ["Host", "open_host", "state_directory"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Host:
    """Where a front serves from: its state directory, and the cgroups where they work.

    `backend` is None only when the front tolerates missing cgroups (serve and run: every
    command then fails closed naming the piece, `cgroup_problem` says which).
    """

    state_dir: Path
    backend: CgroupBackend | None
    cgroup_base: str
    cgroup_problem: str | None = None


def state_directory(explicit: Path | None) -> Path:
    """The state directory (the explicit one, else the default), prepared: 0700 and ours."""
    return prepare_state_dir(explicit or default_state_dir())


def open_host(
    state_dir: Path | None,
    cgroup_base: str | None,
    *,
    move_self: bool = True,
    for_jobs: bool = True,
    tolerate_no_cgroups: bool = False,
) -> Host:
    """Judge the operator's base, prepare the state directory, then resolve the backend.

    Raises `ProcUnavailable` (/proc is not a full procfs), `StateDirError`,
    `UserNamespaceUnavailable` (with `for_jobs`, no root and no user namespace),
    `EnvelopeUnavailable` (with `for_jobs`, no envelope's namespaces, or a read-only
    cgroup mount), `DelegationError` (no cgroup subtree this user may use; without
    `for_jobs`, one that could host no new job still counts), and, unless
    `tolerate_no_cgroups`, `CgroupUnavailable` or `ValueError`.
    """
    # First: the journal, the slots and the envelope all read /proc beyond processes.
    refuse_partial_proc()
    # A base that cannot be one is refused before a state directory is made for nothing.
    refuse_bad_base(cgroup_base)
    if for_jobs:
        # Recovery only removes jobs; anything that starts one needs a user namespace, then
        # the envelope's namespaces (root's too: a sysctl of 0 refuses them to everyone).
        refuse_without_userns()
        refuse_without_namespaces()
    state = state_directory(state_dir)
    try:
        backend, base = resolve_backend(cgroup_base, move_self=move_self, for_jobs=for_jobs)
    except (CgroupUnavailable, ValueError) as exc:
        if not tolerate_no_cgroups:
            raise
        # The operator's base (the option's or the variable's) is carried, never the default
        # in its stead: every command then fails naming it.
        configured = configured_base(cgroup_base)
        return Host(state, None, configured[0] if configured else "jigcmd", str(exc))
    if for_jobs:
        _refuse_read_only(backend)
        if isinstance(backend, V2Backend):
            _say_host_changes(backend)
    return Host(state, backend, base)


def _refuse_read_only(backend: CgroupBackend) -> None:
    """A read-only cgroup mount fails every job's cgroup, root's too: refused at start.

    Not in a container: there each call names the engine's option that makes it writable
    (`diagnosis/container.py`), which a mount's flags alone cannot tell.
    """
    if containerfacts.engine() is not None:
        return
    mount = owncgroup.read_only_mount(backend)
    if mount is not None:
        raise EnvelopeUnavailable(
            f"no envelope can be made here: {owncgroup.read_only_reason(mount)}; fix: "
            f"{owncgroup.read_only_fix(mount)}"
        )


def _say_host_changes(backend: V2Backend) -> None:
    """Name the controllers the host has off that the jobs will turn on (docs/deployment.md)."""
    changes = backend.host_changes()
    if changes:
        what, _ = enabling(changes)
        logger.warning(
            "the jobs' limits need controllers turned off here, so jigcmd enables them as it "
            "makes its first job: %s (`jigcmd doctor` names them and changes nothing)",
            what,
        )
