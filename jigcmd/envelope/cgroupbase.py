"""What a cgroup base is on each host kind, where the operator's comes from, and its words.

The base is the jobs' parent. On a v1 or hybrid host it is a directory name relative to
each hierarchy's root (`jigcmd-u1001` is `/sys/fs/cgroup/memory/jigcmd-u1001`, `…/pids/…`
and so on): one absolute path could name one hierarchy only. On pure v2 it is a directory
inside the cgroup2 mount, absolute or relative to it. The operator's base (`--cgroup-base`,
else `$JIGCMD_CGROUP_BASE`) is checked before any backend is built, in the same words for
both, and a base that cannot be one is refused: never replaced by the default.

Without root on a v1 or hybrid host, the base must be the user's in every hierarchy a job
uses, its `cgroup.procs` included (`chown -R`): `delegated_step` says which are not, and
the one command that makes them, for the server's refusal and the doctor's line alike.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from jigcmd.envelope.cgroups import delegated_hierarchies

__all__ = [
    "ENV",
    "DelegatedStep",
    "base_problem",
    "configured_base",
    "delegated_step",
    "meaning",
    "owners_of",
]

ENV = "JIGCMD_CGROUP_BASE"


def configured_base(
    explicit: str | None, environ: Mapping[str, str] | None = None
) -> tuple[str, str] | None:
    """The operator's base and where it came from (the option, else the variable), or None."""
    if explicit:
        return explicit, "--cgroup-base"
    named = (os.environ if environ is None else environ).get(ENV, "")
    return (named, f"${ENV}") if named else None


def meaning(mode: str, root: str) -> str:
    """What a cgroup base is on a host of `mode`, as one clause."""
    if mode == "v2":
        return (
            f"on this cgroup v2 host a cgroup base is a directory inside the cgroup2 mount {root} "
            "(absolute, or relative to it)"
        )
    kind = "hybrid" if mode == "hybrid" else "cgroup v1"
    return (
        f"on this {kind} host a cgroup base is a directory name relative to each hierarchy, "
        f"the same in every one (jigcmd-u1001 means {root}/memory/jigcmd-u1001, "
        f"{root}/pids/jigcmd-u1001 and so on)"
    )


def base_problem(base: str, source: str, mode: str, root: str) -> tuple[str, str] | None:
    """Why `base` (from `source`) cannot be a cgroup base on this host, and the fix; or None."""
    said = f"the cgroup base {base!r} ({source})"
    if ".." in base.split("/"):
        return (
            f"{said} climbs out of its hierarchy with '..'; {meaning(mode, root)}",
            f"set {source} to a base without '..'",
        )
    if mode == "v2":
        if os.path.isabs(base) and not _under(base, root):
            return (
                f"{said} is outside the cgroup2 mount {root}; {meaning(mode, root)}",
                f"set {source} to a directory under {root}",
            )
        return None
    if not os.path.isabs(base):
        return None
    return (
        f"{said} is an absolute path, which would name one hierarchy only; {meaning(mode, root)}",
        f"set {source} to {_relative_name(base, root)}",
    )


def _under(path: str, root: str) -> bool:
    return posixpath.normpath(path).startswith(posixpath.normpath(root) + "/")


def _relative_name(base: str, root: str) -> str:
    """The name `base` most likely meant: below `<root>/<hierarchy>/`, else without its `/`."""
    path = posixpath.normpath(base)
    if _under(path, root):
        parts = posixpath.relpath(path, root).split("/")[1:]
        if parts:
            return "/".join(parts)
        return f"jigcmd-u{os.geteuid()}"
    return path.lstrip("/") or f"jigcmd-u{os.geteuid()}"


@dataclass(frozen=True)
class DelegatedStep:
    """What is wrong with a v1 or hybrid delegation, and the root command that makes it."""

    why: str
    command: str
    # The base the command makes (the configured one, or the user's own in its stead).
    base: str
    # Said before the command: why it makes another directory than the one configured.
    before: str = ""


def owners_of(root: str, base: str, mode: str) -> dict[str, tuple[int | None, int | None]]:
    """For each hierarchy a job uses: the owners of `<root>/<c>/<base>` and its cgroup.procs."""
    found: dict[str, tuple[int | None, int | None]] = {}
    for controller in delegated_hierarchies(mode):
        directory = posixpath.join(root, controller, base)
        found[controller] = (_owner(directory), _owner(posixpath.join(directory, "cgroup.procs")))
    return found


def _owner(path: str) -> int | None:
    try:
        return os.stat(path).st_uid
    except OSError:
        return None


def delegated_step(
    uid: int,
    base: str,
    root: str,
    mode: str,
    owners: Mapping[str, tuple[int | None, int | None]],
) -> DelegatedStep | None:
    """None when `base` and its cgroup.procs are `uid`'s in every hierarchy a job uses."""
    needed = delegated_hierarchies(mode)
    wrong = [c for c in needed if owners.get(c, (None, None)) != (uid, uid)]
    if not wrong:
        return None
    described = []
    others: set[int] = set()
    for controller in wrong:
        directory, procs = owners.get(controller, (None, None))
        path = posixpath.join(root, controller, base)
        if directory is None:
            described.append(f"{path} is missing")
        elif directory != uid:
            described.append(f"{path} belongs to uid {directory}")
            others |= {directory} - {0}
        else:
            described.append(
                f"{path}/cgroup.procs (and the files beside it) belong to uid {procs}: "
                "the directory was chowned without -R"
            )
    why = f"uid {uid}'s delegated cgroup subtree {base} is incomplete: " + "; ".join(described)
    own = f"jigcmd-u{uid}"
    if others and base != own:
        # Another user's subtree: root must not hand it over; this user gets one of its own.
        theirs = ", ".join(f"uid {o}" for o in sorted(others))
        return DelegatedStep(
            why,
            _loop(needed, own, uid, root),
            own,
            f"{base} is {theirs}'s, not yours: use your own {own} (unset ${ENV}, or set it "
            f"or --cgroup-base to {own}), made so: ",
        )
    return DelegatedStep(why, _loop(wrong, base, uid, root), base)


def _loop(controllers: tuple[str, ...] | list[str], base: str, uid: int, root: str) -> str:
    return (
        f"for c in {' '.join(controllers)}; do mkdir -p {root}/$c/{base} && "
        f"chown -R {uid} {root}/$c/{base}; done"
    )
