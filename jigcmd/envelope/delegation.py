"""Where envelope cgroup jobs live: `jigcmd` for root, a delegated subtree for everyone else.

Without root, jigcmd needs a cgroup subtree the user owns (delegation) — it never falls back
to an unlimited or partial envelope. The choice, in order:

1. `--cgroup-base`, else `$JIGCMD_CGROUP_BASE`, refused when it cannot be a base on this
   host (`cgroupbase`: v2, a directory inside the cgroup2 mount; v1 and hybrid, a name
   relative to every hierarchy); as root it is used as given, and so on v2 without root.
2. root: `jigcmd` in every hierarchy.
3. v2 without root: the server's own cgroup when the user owns it, offers memory, pids and
   cpu, and holds no other process (what `systemd-run --user --scope -p Delegate=yes jigcmd`
   arranges). The server moves itself into a leaf `<own>/jigcmd-server` (a v2 cgroup with
   children must hold no process) and creates jobs under `<own>/jigcmd`.
4. v1/hybrid without root: the configured base, else `jigcmd-u<uid>`, when every hierarchy a
   job uses has it, owned by us with its cgroup.procs (an administrator creates it and
   chowns it with -R; see docs/rootless.md), never created here.

Anything else raises `DelegationError` with the exact commands that fix it.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Callable
from contextvars import ContextVar

from jigcmd.envelope import owncgroup
from jigcmd.envelope.cgroupbase import base_problem, configured_base, delegated_step, owners_of
from jigcmd.envelope.cgroups import CgroupBackend, CgroupUnavailable, detect
from jigcmd.envelope.cgroups import files as cgroupfs

__all__ = [
    "SHARING_FIX",
    "V2_CONTROLLERS",
    "VERB",
    "DelegationError",
    "choose_base",
    "missing_controllers_reason",
    "movable_parent",
    "move_parent",
    "outside_base_fix",
    "outside_base_reason",
    "own_cgroup_v2",
    "refuse_bad_base",
    "resolve_backend",
    "sharing_processes",
    "sharing_reason",
    "this_command",
]

_SERVER_LEAF = "jigcmd-server"
# What every job limits: the delegated cgroup must offer each (its cgroup.controllers).
V2_CONTROLLERS = ("memory", "pids", "cpu")


class DelegationError(OSError):
    """Raised when no cgroup subtree usable by this user exists; says how to create one."""


def own_cgroup_v2(proc_self_cgroup: str = "/proc/self/cgroup") -> str | None:
    """This process's cgroup2 path ("0::<path>" line), or None."""
    with open(proc_self_cgroup, encoding="ascii") as handle:
        for line in handle:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


def choose_base(
    explicit: str | None,
    *,
    mode: str,
    root: str = "/sys/fs/cgroup",
    euid: int | None = None,
    move_self: bool = True,
    for_jobs: bool = True,
) -> str:
    """The `base` to give `cgroups.detect` for this process; see the module docstring.

    Without `for_jobs` (recovery, which only removes jobs), a v2 delegation that could not
    host a new job (a controller missing, another process inside) is still this user's.
    """
    configured = configured_base(explicit)
    euid = os.geteuid() if euid is None else euid
    _refuse_bad_base(configured, mode, root, euid)
    if euid == 0:
        return configured[0] if configured else "jigcmd"
    if mode == "v2":
        if configured is None:
            return _delegated_v2(root, euid, move_self, for_jobs)
        if for_jobs:
            _require_movable_v2(root, *configured)
        return configured[0]
    name = configured[0] if configured else f"jigcmd-u{euid}"
    step = delegated_step(euid, name, root, mode, owners_of(root, name, mode))
    if step is None:
        if mode == "hybrid":
            _require_inside_unified(root, name)
        return name
    raise DelegationError(
        f"running without root needs a cgroup subtree you own: {step.why}; "
        f"{step.before}as root: {step.command}"
        + (
            f" — and start jigcmd inside {shlex.quote(f'{root}/unified/{step.base}')} so it may "
            "move processes "
            f"there: {_move_parent(f'{root}/unified/{step.base}')}"
            if mode == "hybrid"
            else ""
        )
    )


# Parents that end with jigcmd (it runs under them until it exits), so that moving them
# would do nothing; and pid 0 or 1, no parent to move (jigcmd as a container's pid 1).
_WRAPPERS = frozenset({"sudo", "su", "doas", "runuser", "pkexec"})


def _move_parent(cgroup: str) -> str:
    """The root command that moves the process that started jigcmd into `cgroup`, by pid."""
    return move_parent(cgroup, *parent_process())


def movable_parent(parent: int, name: str) -> bool:
    """Whether moving this parent (pid, command name) moves the shell that starts jigcmd."""
    return parent > 1 and name not in _WRAPPERS


def move_parent(
    cgroup: str,
    parent: int,
    name: str,
    *,
    started: str = "this jigcmd",
    as_root: Callable[[str], str] = "as root, {}".format,
) -> str:
    """The root command that moves `parent` (pid, command name) into `cgroup`, in words.

    Its pid, not `$$`: typed into a root shell, `$$` would move that shell instead. When the
    parent is one that ends with what it started (`started`), no pid printed here would
    help: the command says which one to move.
    """
    procs = shlex.quote(f"{cgroup}/cgroup.procs")
    if movable_parent(parent, name):
        return (
            f"{as_root(f'echo {parent} > {procs}')} (pid {parent} started "
            f"{started}: your shell, or the program that runs it; a service's unit must start "
            "its process there)"
        )
    return (
        f"{as_root(f'echo PID > {procs}')}, PID being the shell or the service "
        f"that starts jigcmd ({started}'s parent, pid {parent}{f' {name}' if name else ''}, "
        "ends with it; a container's or a unit's process must start there)"
    )


def parent_process() -> tuple[int, str]:
    """This process's parent: its pid and its command name ("" when it cannot be read)."""
    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/comm", encoding="utf-8", errors="replace") as comm:
            return parent, comm.read().strip()
    except OSError:
        return parent, ""


def _require_inside_unified(root: str, name: str) -> None:
    """On a hybrid host, this process must already sit where it can move a candidate to.

    The kernel moves a process between cgroup2 cgroups only for a writer of their common
    ancestor's `cgroup.procs`; a process outside `unified/<name>` would fail every run at
    "join cgroup". Raised here, at start, with the step; silent when it cannot tell (no
    cgroup2 membership, or a view of the hierarchy where the path does not resolve).
    """
    unified = os.path.join(root, "unified")
    target = os.path.join(unified, name)
    blocked = _unmovable(unified, target)
    if blocked is None:
        return
    here, ancestor = blocked
    if ancestor == target:
        # Inside, yet not allowed to move processes within: the files are not this user's.
        raise DelegationError(
            f"this process may not write {target}/cgroup.procs, so it could not move a "
            f"candidate into its job; as root: chown -R {os.geteuid()} {shlex.quote(target)}"
        )
    raise DelegationError(
        f"this process's cgroup2 is {here}, outside the delegated {target}, so it could not "
        f"move a candidate into its job (the kernel needs write access to {ancestor}); move "
        f"the shell that starts jigcmd there first: {_move_parent(target)}"
    )


def _require_movable_v2(root: str, base: str, source: str) -> None:
    """On pure v2, an operator's base must be one this process can move a candidate into.

    The kernel's rule (as on hybrid, `_require_inside_unified`): write access to the common
    ancestor's `cgroup.procs`. Started outside the delegated subtree holding the base (from a
    login's root-owned scope, say), every run would fail at "join cgroup"; refused here.
    Silent when it cannot tell (no cgroup2 membership, a path that does not resolve).
    """
    target = os.path.normpath(os.path.join(root, base))
    blocked = _unmovable(root, target)
    if blocked is None:
        return
    here, ancestor = blocked
    raise DelegationError(
        f"{outside_base_reason(here, target, source, ancestor)}; {outside_base_fix()}"
    )


def _unmovable(mount: str, target: str) -> tuple[str, str] | None:
    """(this process's cgroup2, the common ancestor) when it may not move a process into
    `target` under the cgroup2 `mount`; None when it may, or when it cannot tell."""
    try:
        own = own_cgroup_v2()
    except OSError:
        return None
    here = os.path.normpath(mount + (own or ""))
    if own is None or not os.path.isdir(here) or not os.path.isdir(target):
        return None
    ancestor = os.path.commonpath([here, target])
    if os.access(os.path.join(ancestor, "cgroup.procs"), os.W_OK):
        return None
    return here, ancestor


def outside_base_reason(here: str, base: str, source: str, ancestor: str) -> str:
    """Why a process outside the subtree that holds its cgroup base could run no job."""
    return (
        f"this process's cgroup {here} is outside the cgroup base {base} ({source}), and "
        f"{ancestor}/cgroup.procs, their common ancestor's, is not yours: the kernel lets a "
        "process move another between cgroup2 cgroups only when it may write that file, so "
        "every run would fail at 'join cgroup: Permission denied'"
    )


def outside_base_fix() -> str:
    """How to start jigcmd where it may move candidates into an operator's base."""
    return (
        "start jigcmd inside the delegated subtree that holds the base, e.g. "
        f"`systemd-run --user --scope -p Delegate=yes {this_command()}` (or unset the base: "
        "a delegated scope's own cgroup is used)"
    )


# The verb this process runs (`run`, `serve`, `jarvis`), set by the command line, so that a
# fix that restarts jigcmd names it; None: any.
VERB: ContextVar[str | None] = ContextVar("jigcmd_verb", default=None)


def this_command() -> str:
    """`jigcmd <verb> …` for the verb this process runs, `jigcmd …` when not known."""
    verb = VERB.get()
    return f"jigcmd {verb} …" if verb else "jigcmd …"


def _delegated_v2(root: str, euid: int, move_self: bool, for_jobs: bool) -> str:
    own = own_cgroup_v2()
    hint = (
        f"{_delegate_hint(root, euid)} (or set --cgroup-base to a cgroup2 directory you own "
        "with memory, pids and cpu available)"
    )
    if own is None:
        raise DelegationError(f"this process is in no cgroup2 hierarchy; {hint}")
    here = os.path.normpath(os.path.join(root, own.lstrip("/")))
    if os.path.basename(here) == _SERVER_LEAF:
        # Already moved (a child of a server that did it, or a restart in the same scope).
        here = os.path.dirname(here)
    if owncgroup.read_only(here):
        # os.access says EROFS: "not delegated to you" would send the user to chown.
        reason, fix = owncgroup.read_only_reason(here), owncgroup.read_only_fix(root)
        raise DelegationError(f"{reason}; {fix}")
    if not os.access(here, os.W_OK) or os.stat(here).st_uid != euid:
        raise DelegationError(f"your cgroup {here} is not delegated to you; {hint}")
    unwritable = owncgroup.unwritable_files(here)
    if unwritable:
        raise DelegationError("; ".join(owncgroup.chowned_without_r(here, unwritable, euid)))
    if for_jobs:
        _require_controllers(here)
        _require_alone(here)
    if move_self:
        _move_into_leaf(here)
    return os.path.join(here, "jigcmd")


def _delegate_hint(root: str, euid: int) -> str:
    """How to get a delegated cgroup: systemd's scope where systemd runs, else cgroupfs steps."""
    if os.path.isdir("/run/systemd/system"):
        return (
            "run jigcmd in a delegated cgroup, e.g. `systemd-run --user --scope -p Delegate=yes "
            f"{this_command()}`"
        )
    parent = parent_process()
    return owncgroup.cgroupfs_fix(
        root,
        euid,
        parent,
        movable_parent(*parent),
        as_root=lambda steps: f"as root, sh -c {shlex.quote(steps)}",
        started="this jigcmd",
        command=this_command(),
    )


def _require_controllers(here: str) -> None:
    """The delegated cgroup must offer what every job limits; silent when unreadable."""
    try:
        offered = cgroupfs.read(os.path.join(here, "cgroup.controllers")).split()
    except OSError:
        return
    missing = [c for c in V2_CONTROLLERS if c not in offered]
    if missing:
        raise DelegationError(
            f"{missing_controllers_reason(here, missing, offered)}; delegate them: "
            "`Delegate=memory pids cpu` for your user manager (docs/rootless.md), or as root "
            f"echo {' '.join('+' + c for c in missing)} > "
            f"{shlex.quote(os.path.dirname(here) + '/cgroup.subtree_control')}"
        )


def missing_controllers_reason(here: str, missing: list[str], offered: list[str]) -> str:
    """Why a delegated cgroup without every controller a job limits is unusable."""
    return (
        f"the delegated cgroup {here} offers no {', '.join(missing)} controller "
        f"(it has: {' '.join(sorted(offered)) or 'none'})"
    )


def _require_alone(here: str) -> None:
    """No process but this one may sit in the delegated cgroup itself.

    jigcmd moves only itself into its leaf: a cgroup whose children get controllers may hold
    no process (the no-internal-process rule), and the others (the shell of a scope that did
    not exec jigcmd, an agent that spawned it) are not jigcmd's to move. Refused at start, with
    them named, instead of failing every run at enabling the controllers.
    """
    others = sharing_processes(here, os.getpid())
    if not others:
        return
    with contextlib.suppress(OSError):
        # A leaf an earlier attempt left empty; EBUSY when a process is in it, then it stays.
        os.rmdir(os.path.join(here, _SERVER_LEAF))
    raise DelegationError(f"{sharing_reason(here, others)}; {SHARING_FIX}")


SHARING_FIX = (
    "start jigcmd as the only process of its delegated cgroup: `systemd-run --user --scope -p "
    "Delegate=yes jigcmd …`, or `exec jigcmd …` from the shell in it (a shell, `timeout` or "
    "`sh -c` that stays beside jigcmd holds the cgroup)"
)


def sharing_processes(directory: str, own_pid: int) -> list[tuple[int, str]]:
    """The processes other than `own_pid` directly in a cgroup: (pid, command name).

    Pid 0 is one outside this pid namespace (the kernel lists it so); [] when unreadable.
    """
    try:
        pids = cgroupfs.pids_in(os.path.join(directory, "cgroup.procs"))
    except OSError:
        return []
    return [(pid, _comm(pid)) for pid in pids if pid != own_pid]


def _comm(pid: int) -> str:
    if pid == 0:
        return ""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as comm:
            return comm.read().strip()
    except OSError:
        return ""


def sharing_reason(here: str, others: list[tuple[int, str]]) -> str:
    """Why processes beside jigcmd in its delegated cgroup make it unusable, each named."""
    named = ", ".join(
        "a process outside this pid namespace"
        if pid == 0
        else f"pid {pid}{f' ({comm})' if comm else ''}"
        for pid, comm in others
    )
    verb = "shares" if len(others) == 1 else "share"
    return (
        f"{named} {verb} your delegated cgroup {here}: a cgroup whose children get controllers "
        "may hold no process (no-internal-process rule), so jigcmd could not limit a job there"
    )


def _move_into_leaf(here: str) -> None:
    """Move this process into `<here>/jigcmd-server`; a leaf made for a failed move goes."""
    leaf = os.path.join(here, _SERVER_LEAF)
    made = not os.path.isdir(leaf)
    os.makedirs(leaf, exist_ok=True)
    try:
        cgroupfs.write(os.path.join(leaf, "cgroup.procs"), str(os.getpid()))
    except OSError:
        if made:
            with contextlib.suppress(OSError):
                os.rmdir(leaf)
        raise


def _refuse_bad_base(configured: tuple[str, str] | None, mode: str, root: str, euid: int) -> None:
    if configured is not None:
        problem = base_problem(*configured, mode, root, euid)
        if problem is not None:
            raise DelegationError(": ".join(problem))


def refuse_bad_base(explicit: str | None) -> None:
    """Raise DelegationError for an operator's base that cannot be one here; changes nothing."""
    try:
        mode = detect().mode
    except (CgroupUnavailable, ValueError):
        return  # resolve_backend names that, as the front tolerates it or not
    _refuse_bad_base(configured_base(explicit), mode, "/sys/fs/cgroup", os.geteuid())


def resolve_backend(
    explicit: str | None = None, *, move_self: bool = True, for_jobs: bool = True
) -> tuple[CgroupBackend, str]:
    """The cgroup backend this process uses, and the base it chose (to hand to the zygote)."""
    mode = detect().mode
    base = choose_base(explicit, mode=mode, move_self=move_self, for_jobs=for_jobs)
    return detect(base=base), base
