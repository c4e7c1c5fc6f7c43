"""Inside a container: which piece of the envelope it withholds, and the option that gives it.

A container engine's defaults withhold exactly what the envelope is built from: capabilities
(`CAP_SYS_ADMIN` for mount, pid and uts namespaces and the pivot into the new root,
`CAP_NET_ADMIN` to bring up `lo` in the envelope's network namespace; `CAP_SETUID` and
`CAP_SETGID`, in the engines' default set, only after `--cap-drop ALL`: see
`capabilities.py`), a fully visible
`/proc` (masked paths make a fresh procfs mount fail with EPERM), a writable cgroup
hierarchy, and a seccomp profile that allows namespace creation. Measured with podman 4.3
(runc) on a hybrid-cgroup host: with `--cap-add SYS_ADMIN --cap-add NET_ADMIN
--security-opt 'unmask=/proc/*' -v /sys/fs/cgroup:/sys/fs/cgroup:rw` the complete envelope
works under the engine's default seccomp profile (which allows namespace creation once
`CAP_SYS_ADMIN` is held), so no profile of our own is needed. The functions take plain facts
so that each diagnosis can be tested without the failing container.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from jigcmd.envelope.cgroups import delegated_hierarchies
from jigcmd.frontends.diagnosis.capabilities import ENVELOPE_CAPABILITIES, lacking
from jigcmd.frontends.diagnosis.verdicts import Check

__all__ = [
    "CAP_NET_ADMIN",
    "CAP_SYS_ADMIN",
    "Engine",
    "Piece",
    "container_check",
    "detect_engine",
    "host_uid",
    "missing_pieces",
    "proc_overmounts",
    "recipe",
]

Engine = Literal["podman", "docker", "container"]
CAP_SYS_ADMIN = 21
CAP_NET_ADMIN = 12

# The option that gives each piece, per engine ("container": an engine we cannot name, which
# gets the podman/docker spelling and the capability by name for a pod spec).
_OPTIONS: dict[str, dict[Engine, str]] = {
    **{
        cap.name: {
            "podman": f"--cap-add {cap.short}",
            "docker": f"--cap-add {cap.short}",
            "container": (
                f"--cap-add {cap.short} (Kubernetes: securityContext.capabilities.add {cap.short})"
            ),
        }
        for cap in ENVELOPE_CAPABILITIES
    },
    "unmasked /proc": {
        # Quoted: an unquoted /proc/* is a glob that zsh refuses to leave unmatched.
        "podman": "--security-opt 'unmask=/proc/*'",
        "docker": "--security-opt systempaths=unconfined",
        "container": (
            "--security-opt 'unmask=/proc/*' (Kubernetes: securityContext.procMount Unmasked)"
        ),
    },
    "writable cgroups v1": {
        "podman": "-v /sys/fs/cgroup:/sys/fs/cgroup:rw",
        "docker": "-v /sys/fs/cgroup:/sys/fs/cgroup:rw",
        "container": "-v /sys/fs/cgroup:/sys/fs/cgroup:rw (a hostPath volume of /sys/fs/cgroup)",
    },
    "writable cgroups v2": {
        "podman": "--cgroupns=private --security-opt unmask=/sys/fs/cgroup",
        "docker": "--cgroupns=private -v /sys/fs/cgroup:/sys/fs/cgroup:rw",
        "container": "a cgroup namespace with /sys/fs/cgroup writable",
    },
    "namespace syscalls": {
        "podman": "--security-opt seccomp=unconfined",
        "docker": "--security-opt seccomp=unconfined",
        "container": "a seccomp profile that allows unshare and clone with namespace flags",
    },
}


@dataclass(frozen=True)
class Piece:
    """One withheld piece of the envelope and the exact option that provides it."""

    piece: str
    why: str
    option: str


def recipe(
    engine: Literal["podman", "docker"], cgroup_mode: str, *, dropped_all: bool = False
) -> dict[str, list[str]]:
    """Each piece's `run` arguments for `engine` on a host of `cgroup_mode`, in order: together
    the smallest set that gives the complete envelope (what docs/deployment.md lists), given
    the engine's default capabilities (after `--cap-drop ALL`, `dropped_all` adds the rest)."""
    cgroups = "writable cgroups v2" if cgroup_mode == "v2" else "writable cgroups v1"
    caps = [cap.name for cap in ENVELOPE_CAPABILITIES if dropped_all or not cap.engine_default]
    pieces = (*caps, "unmasked /proc", cgroups)
    return {piece: shlex.split(_OPTIONS[piece][engine]) for piece in pieces}


def detect_engine(
    *, containerenv: str | None, dockerenv: bool, init_environ: bytes | None
) -> Engine | None:
    """The container engine this process runs under, from what engines leave behind.

    `containerenv`: the text of /run/.containerenv (podman, also rootless); `dockerenv`:
    whether /.dockerenv exists; `init_environ`: /proc/1/environ (`container=` is set by
    podman, systemd-nspawn and LXC), or None when unreadable.
    """
    if containerenv is not None:
        return "podman"
    if dockerenv:
        return "docker"
    for entry in (init_environ or b"").split(b"\0"):
        if entry.startswith(b"container="):
            value = entry.partition(b"=")[2]
            if value.startswith(b"podman"):
                return "podman"
            if value.startswith(b"docker"):
                return "docker"
            return "container"
    return None


def proc_overmounts(mount_points: Sequence[str]) -> list[str]:
    """Mounts over parts of /proc (an engine's masked and read-only paths)."""
    return sorted(point for point in mount_points if point.startswith("/proc/"))


def missing_pieces(
    engine: Engine,
    *,
    cap_eff: int,
    overmounts: Sequence[str],
    cgroup_mode: str | None,
    cgroup_problems: Sequence[str],
    userns_ok: bool,
    root: bool = True,
    host_uid: int | None = None,
    cgroup_read_only: bool = True,
) -> list[Piece]:
    """Every piece the container withholds, each with its option (capabilities: for root;
    without root the envelope's namespaces come with a user namespace and need none).

    `cgroup_read_only`: whether a cgroup mount the jobs write is read-only (unbound); a
    rootless container's refusal on a read-write one is the delegation's alone.
    """

    def piece(name: str, why: str) -> Piece:
        return Piece(name, why, _OPTIONS[name][engine])

    # Every capability the envelope uses as root, not only those the engines withhold by
    # default: `--cap-drop ALL` (Kubernetes `drop: [ALL]`) takes CAP_SETUID and CAP_SETGID too.
    found = [piece(cap.name, cap.why) for cap in lacking(cap_eff)] if root else []
    if overmounts:
        shown = ", ".join(overmounts[:3]) + (" …" if len(overmounts) > 3 else "")
        found.append(piece("unmasked /proc", f"a fresh /proc is refused over {shown}"))
    if cgroup_problems:
        rootless = host_uid is not None and host_uid != 0
        if cgroup_read_only or not rootless:
            name = "writable cgroups v2" if cgroup_mode == "v2" else "writable cgroups v1"
            found.append(piece(name, cgroup_problems[0]))
        if host_uid is not None and rootless:
            # A rootless container: its root is host uid `host_uid`, which may write only
            # cgroups delegated to it, whatever the mount allows (bound writable already,
            # the refusal is the delegation's alone: no bind to ask for again).
            why = f"the container's root is host uid {host_uid}"
            found.append(
                Piece(
                    "delegated cgroups",
                    why if cgroup_read_only else f"{cgroup_problems[0]}; {why}",
                    _delegation_option(host_uid, cgroup_mode),
                )
            )
    if not userns_ok and cap_eff & (1 << CAP_SYS_ADMIN):
        # With CAP_SYS_ADMIN the engines' default profiles allow namespaces: a refusal
        # now is a stricter profile.
        found.append(piece("namespace syscalls", "the seccomp profile refuses unshare/clone"))
    return found


# Every hierarchy a v1 or a hybrid host's job uses, when the container cannot tell which.
_V1_OR_HYBRID = tuple(
    dict.fromkeys((*delegated_hierarchies("v1"), *delegated_hierarchies("hybrid")))
)


def _delegation_option(uid: int, cgroup_mode: str | None) -> str:
    """How an administrator delegates cgroups to a rootless container's host uid."""
    if cgroup_mode == "v2":
        return (
            "run the engine in a delegated cgroup (systemd-run --user --scope -p Delegate=yes "
            "podman run …, or a unit with Delegate=yes)"
        )
    name = f"jigcmd-u{uid}"
    # The container's own view may not show the host's layout: then every hierarchy either
    # kind of host would need.
    wanted = _V1_OR_HYBRID if cgroup_mode is None else delegated_hierarchies(cgroup_mode)
    inside = (
        "" if cgroup_mode == "v1" else f"start the engine inside /sys/fs/cgroup/unified/{name} and "
    )
    return (
        f"as root: for c in {' '.join(wanted)}; do mkdir -p "
        f"/sys/fs/cgroup/$c/{name} && chown -R {uid} /sys/fs/cgroup/$c/{name}; done; "
        f"{inside}pass -e JIGCMD_CGROUP_BASE={name}"
    )


def host_uid(uid_map: str | None) -> int | None:
    """The host uid this process's uid 0 is, from /proc/self/uid_map (None: no mapping of 0)."""
    for line in (uid_map or "").splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0] == "0":
            return int(fields[1])
    return None


def container_check(engine: Engine | None, pieces: Sequence[Piece]) -> Check:
    """The doctor's `container` line: not one, a complete one, or what it withholds and how."""
    if engine is None:
        return Check("container", "ok", "not in a container")
    if not pieces:
        return Check("container", "ok", f"{engine} container with every piece the envelope needs")
    detail = f"{engine} container withholds: " + "; ".join(
        f"{p.piece} ({p.why}) — {p.option}" for p in pieces
    )
    flags = [p.option.split(" (")[0] for p in pieces if p.option.startswith("-")]
    steps = [p.option for p in pieces if not p.option.startswith("-")]
    hint = "; ".join(
        [*([f"start the container with {' '.join(dict.fromkeys(flags))}"] if flags else []), *steps]
    )
    return Check("container", "FAIL", detail, f"{hint} (see docs/deployment.md)")
