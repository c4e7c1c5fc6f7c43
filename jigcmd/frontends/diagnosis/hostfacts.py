"""The host facts the delegation verdict needs, read from /proc and the cgroup mounts."""

from __future__ import annotations

import os
import posixpath

from jigcmd.envelope import owncgroup
from jigcmd.envelope.cgroupbase import configured_base, owners_of
from jigcmd.envelope.delegation import parent_process, sharing_processes
from jigcmd.frontends.diagnosis.delegation import DelegationFacts

__all__ = ["delegation_facts", "own_cgroup2_path"]

_SERVER_LEAF = "jigcmd-server"


def own_cgroup2_path(text: str) -> str | None:
    """The cgroup2 path of a /proc/<pid>/cgroup text (its `0::` line), or None."""
    for line in text.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or None
    return None


def _owner(path: str) -> int | None:
    try:
        return os.stat(path).st_uid
    except OSError:
        return None


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def delegation_facts(
    mode: str, container: str | None, root: str = "/sys/fs/cgroup"
) -> DelegationFacts:
    """What a rootless jigcmd's delegation looks like on this host, for this process."""
    uid = os.geteuid()
    configured = configured_base(None)
    explicit, source = configured if configured else (None, None)
    relative = own_cgroup2_path(_read("/proc/self/cgroup"))
    systemd = os.path.isdir("/run/systemd/system")
    parent, parent_name = parent_process()
    if mode == "v2":
        own = None if relative is None else posixpath.normpath(root + relative)
        if own is not None and posixpath.basename(own) == _SERVER_LEAF:
            own = posixpath.dirname(own)  # a server's leaf: the delegated cgroup is above
        # A relative base is relative to the cgroup2 mount, as the backend reads it.
        directory = posixpath.normpath(posixpath.join(root, explicit)) if explicit else own
        controllers = _read(posixpath.join(directory, "cgroup.controllers")) if directory else ""
        may_move = directory is not None and os.access(directory, os.W_OK)
        if explicit and own is not None and directory is not None:
            # A candidate moves from this process's cgroup into the base: the kernel asks
            # for their common ancestor's cgroup.procs.
            ancestor = posixpath.commonpath([own, directory])
            may_move = may_move and os.access(posixpath.join(ancestor, "cgroup.procs"), os.W_OK)
        owner = _owner(directory) if directory else None
        return DelegationFacts(
            uid=uid,
            mode=mode,
            base=explicit or directory or "",
            source=source,
            own_cgroup=own,
            base_cgroup=directory,
            own_owner=owner,
            may_move=may_move,
            read_only=directory is not None and owncgroup.read_only(directory),
            # Only the own cgroup is one jigcmd moves itself in and enables controllers of.
            unwritable=tuple(owncgroup.unwritable_files(directory))
            if directory and not explicit and owner == uid
            else (),
            own_controllers=frozenset(controllers.split()),
            # An explicit base is the jobs' parent, not a cgroup jigcmd moves itself out of.
            sharing=tuple(sharing_processes(own, os.getpid())) if own and not explicit else (),
            root=root,
            systemd=systemd,
            container=container,
            parent_pid=parent,
            parent_name=parent_name,
        )
    base = explicit or f"jigcmd-u{uid}"
    owners = owners_of(root, base, mode)
    unified = posixpath.join(root, "unified")
    own = None if relative is None else posixpath.normpath(unified + relative)
    may_move = False
    if own is not None and mode == "hybrid":
        ancestor = posixpath.commonpath([own, posixpath.join(unified, base)])
        may_move = os.access(posixpath.join(ancestor, "cgroup.procs"), os.W_OK)
    return DelegationFacts(
        uid=uid,
        mode=mode,
        base=base,
        source=source,
        owners={c: directory for c, (directory, _) in owners.items()},
        procs_owners={c: procs for c, (_, procs) in owners.items()},
        own_cgroup=own,
        may_move=may_move,
        root=root,
        systemd=systemd,
        container=container,
        parent_pid=parent,
        parent_name=parent_name,
    )
