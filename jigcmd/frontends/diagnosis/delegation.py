"""Pure verdict: is the delegated cgroup subtree a rootless jigcmd needs set up, step by step?

Without root jigcmd needs a cgroup subtree its user owns. On a v1 or hybrid host that is
`jigcmd-u<uid>` in every controller hierarchy, and, on a hybrid host, one more step that is
easy to miss: the process that starts jigcmd must already sit inside the delegated cgroup of
the unified (cgroup2) hierarchy, because the kernel lets a process move another between
cgroup2 cgroups only when it may write the `cgroup.procs` of their common ancestor (without
it every run fails at "join cgroup: Permission denied"). On pure v2 it is the process's own
cgroup, owned by the user, with the memory, pids and cpu controllers available and no other
process in it. One message per missing step, and a fix worded for the host: hybrid or v2,
systemd or not, in a container or not.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from jigcmd.envelope import owncgroup
from jigcmd.envelope.cgroupbase import base_problem, delegated_step
from jigcmd.envelope.cgroups import delegated_hierarchies
from jigcmd.envelope.delegation import (
    SHARING_FIX,
    V2_CONTROLLERS,
    missing_controllers_reason,
    movable_parent,
    move_parent,
    outside_base_fix,
    outside_base_reason,
    sharing_reason,
)
from jigcmd.frontends.diagnosis.verdicts import Check

__all__ = ["DelegationFacts", "delegation_check"]

NAME = "delegation"


@dataclass(frozen=True)
class DelegationFacts:
    """What the doctor found, as plain values."""

    uid: int
    mode: str  # "v1", "hybrid" or "v2"
    # The base jigcmd would use: $JIGCMD_CGROUP_BASE, else jigcmd-u<uid> (v1/hybrid) or the
    # process's own cgroup (v2).
    base: str
    # Where an operator's base came from ("$JIGCMD_CGROUP_BASE"), None for the default.
    source: str | None = None
    # v1/hybrid: controller -> owner uid of <root>/<controller>/<base>, None when missing.
    owners: Mapping[str, int | None] = field(default_factory=dict)
    # v1/hybrid: controller -> owner uid of its cgroup.procs (absent: taken as the directory's).
    procs_owners: Mapping[str, int | None] = field(default_factory=dict)
    # The cgroup2 directory this process is in (hybrid: under <root>/unified), None unknown.
    own_cgroup: str | None = None
    # v2: the directory jobs go under: the own cgroup, else the operator's base.
    base_cgroup: str | None = None
    # Whether this uid may write `cgroup.procs` of that directory's and the delegated one's
    # common ancestor (hybrid; v2 with an operator's base, and the base itself), or of its
    # own directory (v2).
    may_move: bool = False
    # v2: the owner of the jobs' directory (`base_cgroup`) and the controllers it offers.
    own_owner: int | None = None
    own_controllers: frozenset[str] = frozenset()
    # v2: the other processes directly in the own cgroup (pid, command name); jigcmd moves
    # only itself into its leaf, so any of them fails every job's controllers.
    sharing: tuple[tuple[int, str], ...] = ()
    # v2: whether the cgroup2 mount holding the jobs' directory is read-only, and which of the
    # files jigcmd writes in the own cgroup (cgroup.procs, cgroup.subtree_control) it may not.
    read_only: bool = False
    unwritable: tuple[str, ...] = ()
    root: str = "/sys/fs/cgroup"
    systemd: bool = False
    container: str | None = None
    # The process that started the doctor (a shell, usually): where the move must happen,
    # unless it is a wrapper that ends with the doctor (its command name says).
    parent_pid: int = 0
    parent_name: str = ""


def _as_root(facts: DelegationFacts, command: str) -> str:
    """`command` as the host's root runs it."""
    quoted = "'" + command.replace("'", "'\\''") + "'"
    if facts.container is not None:
        return f"as root in this {facts.container} container: sh -c {quoted}"
    return f"sudo sh -c {quoted}"


def delegation_check(facts: DelegationFacts) -> Check:
    """One line: ok, or every missing step (each once) with the command that makes it."""
    if facts.source is not None:
        problem = base_problem(facts.base, facts.source, facts.mode, facts.root, facts.uid)
        if problem is not None:
            return Check(NAME, "FAIL", *problem)
    if facts.mode == "v2":
        return _v2(facts)
    steps: list[tuple[str, str]] = []
    needed = delegated_hierarchies(facts.mode)
    owners = {
        c: (facts.owners.get(c), facts.procs_owners.get(c, facts.owners.get(c))) for c in needed
    }
    step = delegated_step(facts.uid, facts.base, facts.root, facts.mode, owners)
    if step is not None:
        steps.append((step.why, step.before + _as_root(facts, step.command)))
    # Another user's base is replaced by this user's own in the fix: the move goes there
    # (`may_move` was read against the configured one).
    base = facts.base if step is None else step.base
    unified = posixpath.join(facts.root, "unified", base)
    may_move = facts.may_move and base == facts.base
    if facts.mode == "hybrid" and not _inside(facts.own_cgroup, unified) and not may_move:
        steps.append(_unified_step(facts, unified))
    if not steps:
        where = (
            f"{facts.base} in every hierarchy a job uses ({' '.join(needed)}), owned by uid "
            f"{facts.uid} with its files"
        )
        if facts.mode == "hybrid":
            where += f"; this process's cgroup2 is inside {unified}"
        return Check(NAME, "ok", where)
    if len(steps) == 1:
        return Check(NAME, "FAIL", steps[0][0], steps[0][1])
    detail = "; ".join(f"({n}) {why}" for n, (why, _) in enumerate(steps, 1))
    fix = "; then ".join(f"({n}) {how}" for n, (_, how) in enumerate(steps, 1))
    return Check(NAME, "FAIL", f"{len(steps)} steps are missing: {detail}", fix)


def _inside(path: str | None, directory: str) -> bool:
    return path is not None and (path == directory or path.startswith(directory + "/"))


def _unified_step(facts: DelegationFacts, unified: str) -> tuple[str, str]:
    own = facts.own_cgroup or "unknown"
    why = (
        f"this process's cgroup2 is {own}, outside the delegated {unified}: the kernel lets a "
        "process move another between cgroup2 cgroups only when it may write their common "
        "ancestor, so every run would fail at 'join cgroup: Permission denied'"
    )
    move = move_parent(
        unified,
        facts.parent_pid,
        facts.parent_name,
        started="this doctor",
        as_root=lambda command: _as_root(facts, command),
    )
    return why, f"move the shell that starts jigcmd into it before starting jigcmd: {move}"


def _v2(facts: DelegationFacts) -> Check:
    if facts.read_only and facts.base_cgroup is not None:
        reason = owncgroup.read_only_reason(facts.base_cgroup)
        return Check(NAME, "FAIL", reason, owncgroup.read_only_fix(facts.root))
    if facts.source is not None and facts.base_cgroup is not None:
        return _v2_base(facts, facts.base_cgroup, facts.source)
    own = facts.own_cgroup
    if own is None:
        return Check(
            NAME,
            "FAIL",
            "this process is in no cgroup2 cgroup (/proc/self/cgroup has no 0:: line)",
            _v2_fix(facts),
        )
    if facts.own_owner != facts.uid or not facts.may_move:
        owner = "missing" if facts.own_owner is None else f"owned by uid {facts.own_owner}"
        return Check(
            NAME,
            "FAIL",
            f"this process's cgroup {own} ({owner}) is not delegated to uid {facts.uid}",
            _v2_fix(facts),
        )
    if facts.unwritable:
        return Check(
            NAME, "FAIL", *owncgroup.chowned_without_r(own, list(facts.unwritable), facts.uid)
        )
    missing = [c for c in V2_CONTROLLERS if c not in facts.own_controllers]
    if missing:
        return Check(
            NAME,
            "FAIL",
            missing_controllers_reason(own, missing, sorted(facts.own_controllers)),
            _v2_controllers_fix(facts, own),
        )
    if facts.sharing:
        return Check(NAME, "FAIL", sharing_reason(own, list(facts.sharing)), SHARING_FIX)
    return Check(NAME, "ok", f"this process's cgroup {own} is delegated to uid {facts.uid}")


def _v2_base(facts: DelegationFacts, base: str, source: str) -> Check:
    """An operator's base: the user's, with the controllers, and reachable from here."""
    if facts.own_owner != facts.uid:
        owner = "missing" if facts.own_owner is None else f"owned by uid {facts.own_owner}"
        return Check(
            NAME,
            "FAIL",
            f"the cgroup base {base} ({source}; {owner}) is not delegated to uid {facts.uid}",
            f"set {source} to a cgroup2 directory you own with memory, pids and cpu "
            f"available, or unset it and {_v2_fix(facts)}",
        )
    missing = [c for c in V2_CONTROLLERS if c not in facts.own_controllers]
    if missing:
        return Check(
            NAME,
            "FAIL",
            missing_controllers_reason(base, missing, sorted(facts.own_controllers)),
            _v2_controllers_fix(facts, base),
        )
    own = facts.own_cgroup
    if own is not None and not facts.may_move:
        ancestor = posixpath.commonpath([own, base])
        return Check(
            NAME, "FAIL", outside_base_reason(own, base, source, ancestor), outside_base_fix()
        )
    return Check(
        NAME,
        "ok",
        f"the cgroup base {base} ({source}) is delegated to uid {facts.uid}"
        + (f", and this process's cgroup {own} may move candidates into it" if own else ""),
    )


def _v2_fix(facts: DelegationFacts) -> str:
    if facts.systemd and facts.container is None:
        return (
            "run jigcmd in a delegated scope: systemd-run --user --scope -p Delegate=yes "
            "jigcmd … (docs/rootless.md)"
        )
    return owncgroup.cgroupfs_fix(
        facts.root,
        facts.uid,
        (facts.parent_pid, facts.parent_name),
        movable_parent(facts.parent_pid, facts.parent_name),
        as_root=lambda steps: _as_root(facts, steps),
        started="this doctor",
        command="jigcmd …",
    )


def _v2_controllers_fix(facts: DelegationFacts, own: str) -> str:
    if facts.systemd and facts.container is None:
        return (
            "let the user manager delegate them: sudo mkdir -p "
            "/etc/systemd/system/user@.service.d && printf '[Service]\\nDelegate=memory pids "
            "cpu\\n' | sudo tee /etc/systemd/system/user@.service.d/delegate.conf && sudo "
            "systemctl daemon-reload, then log in again"
        )
    parent = posixpath.dirname(own)
    return _as_root(
        facts, f"echo +memory +pids +cpu > {shlex.quote(parent + '/cgroup.subtree_control')}"
    )
