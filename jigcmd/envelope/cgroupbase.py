"""What a cgroup base is on each host kind, where the operator's comes from, and its words.

The base is the jobs' parent. On a v1 or hybrid host it is a directory name relative to
each hierarchy's root (`jigcmd-u1001` is `/sys/fs/cgroup/memory/jigcmd-u1001`, `…/pids/…`
and so on): one absolute path could name one hierarchy only. On pure v2 it is a directory
inside the cgroup2 mount, absolute or relative to it. The operator's base (`--cgroup-base`,
else `$JIGCMD_CGROUP_BASE`) is checked before any backend is built, in the same words for
both, and a base that cannot be one is refused: never replaced by the default. Refused too: a
name with characters cgroups do not have in practice (it goes into root commands printed
for pasting), a `.`/`..` component, a hierarchy's root, a control file's name or place
(no directory can be made there), or, without root, root's `jigcmd`.

Without root on a v1 or hybrid host, the base must be the user's in every hierarchy a job
uses, its `cgroup.procs` included (`chown -R`): `delegated_step` says which are not, and
the one command that makes them, for the server's refusal and the doctor's line alike.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import shlex
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass

from jigcmd.envelope.cgroups import V1_CONTROLLERS, CgroupBackend, delegated_hierarchies
from jigcmd.envelope.cgroups.v1 import V1Backend
from jigcmd.envelope.cgroups.v2 import V2Backend

__all__ = [
    "ENV",
    "DelegatedStep",
    "absent_base_directories",
    "base_problem",
    "configured_base",
    "delegated_step",
    "meaning",
    "own_base",
    "owners_of",
    "remove_empty",
]

ENV = "JIGCMD_CGROUP_BASE"
# The doctor's `--cgroup-base`, for the checks that read the base where serve reads it when
# no option is given: so a refusal names the option the person typed, not the variable.
OPTION: ContextVar[str | None] = ContextVar("cgroup_base_option", default=None)
# The characters cgroup names have in practice; the base reaches root commands printed for
# pasting into a shell (quoted too), so nothing else is taken.
_NAME_CHARS = re.compile(r"[A-Za-z0-9_.@:+/-]*")
# systemd escapes every other byte of a unit's name as \xNN in its cgroup's name
# (`system-jigcmd\x2djarvis.slice`), and a unit's ControlGroup is a documented base.
_SYSTEMD_ESCAPE = re.compile(r"\\x[0-9a-fA-F]{2}")
_ALLOWED = (
    "letters, digits and _ . @ : + - (with / between directories, and systemd's \\xNN escapes)"
)
# A component named so is a control file: `cgroup.procs`, `memory.max`, v1's `tasks`….
_CONTROL_NAME = re.compile("(" + "|".join(sorted({"cgroup", "io", *V1_CONTROLLERS})) + r")\..*")
_V1_ROOT_FILES = frozenset({"tasks", "notify_on_release", "release_agent"})
# Root's default base: its servers' jobs live there, never another user's to take.
_ROOT_BASE = "jigcmd"


def configured_base(
    explicit: str | None, environ: Mapping[str, str] | None = None
) -> tuple[str, str] | None:
    """The operator's base and where it came from (the option, else the variable), or None."""
    explicit = explicit if explicit is not None else OPTION.get()
    if explicit is not None:
        # An empty option is refused (base_problem), never read as "use the default".
        return explicit, "--cgroup-base"
    # An empty variable is an unset one (`JIGCMD_CGROUP_BASE= jigcmd …` unsets it).
    named = (os.environ if environ is None else environ).get(ENV, "")
    return (named, f"${ENV}") if named else None


def own_base(uid: int) -> str:
    """The base a user gets by default on a v1 or hybrid host: `jigcmd` for root."""
    return _ROOT_BASE if uid == 0 else f"jigcmd-u{uid}"


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


def base_problem(
    base: str, source: str, mode: str, root: str, uid: int | None = None
) -> tuple[str, str] | None:
    """Why `base` (from `source`) cannot be a cgroup base on this host, and the fix; or None."""
    uid = os.geteuid() if uid is None else uid
    said = f"the cgroup base {base!r} ({source})"
    shape = _shape_problem(base, said, mode, root)
    if shape is not None:
        return shape[0], shape[1].format(source=source, own=own_base(uid))
    if mode == "v2":
        if os.path.isabs(base) and not _under(base, root):
            return (
                f"{said} is outside the cgroup2 mount {root}; {meaning(mode, root)}",
                f"set {source} to a directory under {root}",
            )
    elif os.path.isabs(base):
        return (
            f"{said} is an absolute path, which would name one hierarchy only; "
            f"{meaning(mode, root)}",
            f"set {source} to {_relative_name(base, root, uid)}",
        )
    control = _control_file_problem(base, said, mode, root)
    if control is not None:
        return control, f"set {source} to a directory name such as {own_base(uid)}"
    if uid != 0 and _is_roots(base, mode, root):
        return (
            f"{said}: that is root's base (root's servers run their jobs in it), never another "
            "user's to take",
            _use_own(source, own_base(uid))
            if mode != "v2"
            else f"unset ${ENV} and --cgroup-base: without root jigcmd uses your own "
            "delegated cgroup (docs/rootless.md)",
        )
    return None


def _use_own(source: str, own: str) -> str:
    if source == "--cgroup-base":
        return f"use your own {own}: --cgroup-base {own}"
    return f"use your own {own}: unset ${ENV}, or set it to {own}"


def _shape_problem(base: str, said: str, mode: str, root: str) -> tuple[str, str] | None:
    """A base no host takes (empty, odd characters, `.`/`..`, a hierarchy's root): why, fix."""
    fix = "set {source} to a directory name such as {own}"
    if not base.strip():
        return f"{said} is empty or blank, which names no cgroup", fix
    plain = _SYSTEMD_ESCAPE.sub("_", base)
    if not _NAME_CHARS.fullmatch(plain):
        odd = "".join(sorted({c for c in plain if not _NAME_CHARS.fullmatch(c)}))
        return (
            f"{said} contains {odd!r}; a cgroup base is made of {_ALLOWED}, the characters "
            "cgroup names have in practice (it also goes into the root commands printed here)",
            fix,
        )
    parts = base.split("/")
    if {".", ".."} & set(parts):
        return (
            f"{said} has a '.' or '..' component, which points elsewhere than the name says; "
            f"{meaning(mode, root)}",
            "set {source} to a base without '.' or '..' components",
        )
    named = [p for p in parts if p]
    inside = posixpath.relpath(posixpath.normpath(base), root) if os.path.isabs(base) else base
    # v2: the mount itself; v1/hybrid: `/`, the mount or one hierarchy (`<root>/memory`).
    if not named or (
        os.path.isabs(base) and (inside == "." or (mode != "v2" and "/" not in inside))
    ):
        return (
            f"{said} is a cgroup hierarchy's root, where every process of the host is; "
            f"{meaning(mode, root)}",
            fix,
        )
    return None


def _control_file_problem(base: str, said: str, mode: str, root: str) -> str | None:
    """Why `base` would be a control file (`cgroup.procs`, `memory.max`…): by name, or a
    file already there in a hierarchy; a directory can never be made in its place."""
    relative = posixpath.relpath(posixpath.normpath(base), root) if os.path.isabs(base) else base
    parts = [p for p in relative.split("/") if p]
    named = [p for p in parts if p in _V1_ROOT_FILES or _CONTROL_NAME.fullmatch(p)]
    if named:
        return (
            f"{said} has the component {named[0]!r}, the name of a cgroup's control file, "
            f"where a directory cannot be made; {meaning(mode, root)}"
        )
    for hierarchy in _hierarchies(mode, root):
        path = hierarchy
        for part in parts:
            path = posixpath.join(path, part)
            if os.path.lexists(path) and not os.path.isdir(path):
                return (
                    f"{said} names {path}, a file (a cgroup's control file), not a directory; "
                    f"{meaning(mode, root)}"
                )
    return None


def _hierarchies(mode: str, root: str) -> list[str]:
    """The hierarchies' roots a base is made in: the cgroup2 mount, or each under `root`."""
    if mode == "v2":
        return [root]
    try:
        return sorted(e.path for e in os.scandir(root) if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def _is_roots(base: str, mode: str, root: str) -> bool:
    """Whether `base` is root's default base or lies under it."""
    if mode == "v2" and os.path.isabs(base):
        base = posixpath.relpath(posixpath.normpath(base), root)
    return base.strip("/").split("/")[0] == _ROOT_BASE


def _under(path: str, root: str) -> bool:
    return posixpath.normpath(path).startswith(posixpath.normpath(root) + "/")


def _relative_name(base: str, root: str, uid: int) -> str:
    """The name `base` most likely meant: below `<root>/<hierarchy>/`, else without its `/`.

    Never root's `jigcmd` for another user: that fix would only be refused next.
    """
    path = posixpath.normpath(base)
    if _under(path, root):
        name = "/".join(posixpath.relpath(path, root).split("/")[1:])
    else:
        name = path.lstrip("/")
    return own_base(uid) if uid != 0 and _is_roots(name, "v1", root) else name


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
            others.add(directory)
        else:
            described.append(
                f"{path}/cgroup.procs (and the files beside it) belong to uid {procs}: "
                "the directory was chowned without -R"
            )
    why = f"uid {uid}'s delegated cgroup subtree {base} is incomplete: " + "; ".join(described)
    own = own_base(uid)
    # `jigcmd-u<uid>` is this user's by its name (root made it, chown forgotten); any other
    # base someone else owns, root included, is theirs: root must not hand it over.
    mine = base == own or base.startswith(own + "/")
    if others and not mine:
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
    # Quoted although base_problem took only plain names: this text is pasted by root.
    path = f"{shlex.quote(root)}/$c/{shlex.quote(base)}"
    names = " ".join(shlex.quote(c) for c in controllers)
    return f"for c in {names}; do mkdir -p {path} && chown -R {uid} {path}; done"


def absent_base_directories(backend: CgroupBackend) -> list[str]:
    """The directories from each hierarchy's root down to the jobs' base not there yet."""
    if isinstance(backend, V2Backend):
        tops = [(backend.mount, posixpath.relpath(backend.base_path, backend.mount))]
    elif isinstance(backend, V1Backend):
        roots = [*backend.hierarchies.values(), *([backend.unified] if backend.unified else [])]
        tops = [(top, backend.base) for top in dict.fromkeys(roots)]
    else:
        return []
    found: list[str] = []
    for top, base in tops:
        directory = top
        for part in (p for p in base.split("/") if p):
            directory = posixpath.join(directory, part)
            found.append(directory)
    return [d for d in found if not os.path.isdir(d)]


def remove_empty(directories: list[str]) -> None:
    """rmdir each of `directories` (made in that order) that is empty, deepest first."""
    for directory in reversed(directories):
        with contextlib.suppress(OSError):
            os.rmdir(directory)
