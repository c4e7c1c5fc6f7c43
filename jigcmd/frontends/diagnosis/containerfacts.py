"""What the container this process runs in withholds from the envelope, read from the host.

The facts behind the doctor's `container` line (diagnosis/container.py judges them), read
once here so that a fail-closed answer names the same missing piece and option as the doctor.
"""

from __future__ import annotations

import os

from jigcmd.frontends.diagnosis.container import (
    Engine,
    Piece,
    container_check,
    detect_engine,
    host_uid,
    missing_pieces,
    proc_overmounts,
)

__all__ = ["cgroup_fix", "container_advice", "engine", "withheld"]


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _cap_eff() -> int:
    for line in (_read("/proc/self/status") or "").splitlines():
        name, _, value = line.partition(":")
        if name == "CapEff":
            return int(value.strip(), 16)
    return 0


def engine() -> Engine | None:
    """The container engine this process runs under (None: not in a container)."""
    return detect_engine(
        containerenv=_read("/run/.containerenv"),
        dockerenv=os.path.exists("/.dockerenv"),
        init_environ=_read_bytes("/proc/1/environ"),
    )


def _cgroup_facts() -> tuple[str | None, list[str], bool]:
    """The cgroup mode, what keeps root from making the jobs' cgroups, and whether a mount
    the jobs write is read-only (the engine's unbound /sys/fs/cgroup)."""
    from jigcmd.envelope import owncgroup  # noqa: PLC0415 - Linux only
    from jigcmd.envelope.delegation import DelegationError, resolve_backend  # noqa: PLC0415 - Linux only

    try:
        backend, _ = resolve_backend(move_self=False)
    except (OSError, ValueError) as exc:
        # Without root, cgroups it may not write are the delegation's business, not the
        # container's (the container may well give root every piece); nor is a configured
        # base that cannot be one, root's or not.
        return None, [] if isinstance(exc, DelegationError) else [str(exc)], True
    read_only = owncgroup.read_only_mount(backend) is not None
    return backend.mode, backend.problems(), read_only


def withheld(container: Engine, *, userns_ok: bool = True) -> list[Piece]:
    """Every piece `container` withholds from this process (`userns_ok`: the forked probe's
    verdict, which only the doctor runs: a server may hold threads)."""
    from jigcmd.envelope.cgroups import read_mounts  # noqa: PLC0415 - Linux only

    mode, problems, read_only = _cgroup_facts()
    return missing_pieces(
        container,
        cap_eff=_cap_eff(),
        overmounts=proc_overmounts([m.point for m in read_mounts()]),
        cgroup_mode=mode,
        cgroup_problems=problems,
        userns_ok=userns_ok,
        root=os.geteuid() == 0,
        host_uid=host_uid(_read("/proc/self/uid_map")),
        cgroup_read_only=read_only,
    )


def container_advice() -> str | None:
    """What the container withholds and the option that gives it, in the doctor's words; None
    outside a container, or when it withholds nothing the envelope needs."""
    found = engine()
    if found is None:
        return None
    try:
        pieces = withheld(found)
    except OSError:
        return None  # advice only: the failure it would explain is reported either way
    if not pieces:
        return None
    check = container_check(found, pieces)
    names = ", ".join(piece.piece for piece in pieces)
    return f"this {found} container withholds {names}: {check.hint}"


def cgroup_fix() -> str | None:
    """In a container, the options and steps that give the jobs their cgroups (the `container`
    line's, for cgroups alone): a remount inside the container is refused as busy. None
    outside one, or when it withholds no cgroup piece."""
    found = engine()
    if found is None:
        return None
    try:
        pieces = [p for p in withheld(found) if "cgroups" in p.piece]
    except OSError:
        return None  # a fix only: the cgroups line reports its failure either way
    return container_check(found, pieces).hint if pieces else None
