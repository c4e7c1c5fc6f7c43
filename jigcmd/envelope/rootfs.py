"""Build the envelope's minimal root inside a fresh mount namespace, then pivot into it.

Runs in the pid-1 init, which is root of its own user namespace. The order below is the
result of measurement; each step says why it sits where it does.

1. Make every inherited mount private, so nothing we do propagates to the host.
2. Mount a tmpfs over `/tmp` and pivot into it with the host tree at `/oldroot`. From then
   on every host path is reachable as `/oldroot/<path>`, even one that our own mounts would
   shadow (a venv under `/tmp`, say). This is bubblewrap's double-pivot, re-derived.
3. Build `/newroot` on its own tmpfs: read-only binds, the candidate tree, scratch, `/dev`,
   a truthful read-only memory-limit view for Bun.
4. Mount `/proc` *before* the old root is detached: the kernel refuses a fresh procfs in a
   user namespace unless a fully visible procfs exists in the mount namespace ("mount too
   revealing", EPERM).
5. Remount `/newroot` read-only, pivot into it and detach the old root lazily.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Mapping

from jigcmd.envelope import syscalls as sc
from jigcmd.plan import CANDIDATE_ROOT, RunPlan

__all__ = ["RootfsError", "build_root", "seal_candidate"]

_BASE = "/tmp"
_OLD = "/oldroot"
_NEW = "/newroot"

# statvfs f_flag bits whose mount flags a user namespace may not clear on remount ("locked").
_LOCKED_FLAGS = (
    (os.ST_NOSUID, sc.MS_NOSUID),
    (os.ST_NODEV, sc.MS_NODEV),
    (os.ST_NOEXEC, sc.MS_NOEXEC),
    (os.ST_NOATIME, 0x400),  # MS_NOATIME
    (os.ST_NODIRATIME, 0x800),  # MS_NODIRATIME
    (os.ST_RELATIME, 1 << 21),  # MS_RELATIME (ST_RELATIME is 4096, the mount flag differs)
)

_DEVICES = ("null", "zero", "urandom")
# A file made on the root tmpfs (a bind's target, a memory view); never through a link.
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
_MEMORY_VIEWS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
_CANDIDATE_TREE_BYTES = 4 * 1024 * 1024
_CANDIDATE_TREE_INODES = 2048


class RootfsError(Exception):
    """Raised when a step of building the root fails; `step` names it for the caller."""

    def __init__(self, step: str, error: BaseException | str) -> None:
        super().__init__(f"{step}: {error}")
        self.step = step


def build_root(plan: RunPlan, sources: Mapping[str, int], memory_limit: str) -> None:
    """Leave the calling process pivoted into the finished envelope root.

    `sources` maps each bind source to an O_PATH descriptor opened by pid 1 while it was
    still host uid 0: init (host uid 65534) may lack search permission on the way to a
    source (a venv under a 0700 home), but binding from the descriptor needs none.
    `memory_limit` is the limit as the kernel reported it when the cgroup was made.
    """
    made: set[str] = set()
    _step("make mounts private", sc.mount, None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
    _step(
        "mount base tmpfs",
        sc.mount,
        "jigcmd",
        _BASE,
        "tmpfs",
        sc.MS_NOSUID | sc.MS_NODEV,
        "mode=0700,size=64k",
    )
    _step("create old-root directory", os.mkdir, _BASE + _OLD, 0o700)
    _step("create new-root directory", os.mkdir, _BASE + _NEW, 0o755)
    _step("pivot into base tmpfs", sc.pivot_root, _BASE, _BASE + _OLD)
    _step("chdir to base", os.chdir, "/")

    _step(
        "mount root tmpfs",
        sc.mount,
        "jigcmd-root",
        _NEW,
        "tmpfs",
        sc.MS_NOSUID | sc.MS_NODEV,
        "mode=0755,size=256k,nr_inodes=1024",
    )
    # Scratch first: a bind below /tmp (a jarvis working directory) must land on top of it.
    _scratch(plan.limits.scratch_bytes, made)
    for bind in plan.binds:
        fd = sources.get(bind.source)
        source = _OLD + (f"/proc/self/fd/{fd}" if fd is not None else bind.source)
        _bind(source, _NEW + bind.target, bind.writable, made, shown=bind.source)
    if plan.profile == "candidate":
        _candidate_mount(made)
    _dev(made)
    _memory_view(memory_limit, made)
    _makedirs(_NEW + "/proc", made)
    # Before the old root goes: see the module docstring, step 4.
    _step(
        "mount /proc",
        sc.mount,
        "proc",
        _NEW + "/proc",
        "proc",
        sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC,
        "hidepid=invisible,subset=pid",
    )
    _step(
        "remount root read-only",
        sc.mount,
        None,
        _NEW,
        None,
        sc.MS_REMOUNT | sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV,
    )
    _step("chdir to new root", os.chdir, _NEW)
    # pivot_root(".", ".") stacks the old root on top of the new one; detaching "." then
    # drops the old root (host tree and base tmpfs) without needing a directory for it.
    _step("pivot into new root", sc.pivot_root, ".", ".")
    _step("detach old root", sc.umount2, ".", sc.MNT_DETACH)
    _step("chdir to new root", os.chdir, "/")


def _step(name: str, func: object, *args: object) -> None:
    try:
        func(*args)  # type: ignore[operator]
    except OSError as exc:
        raise RootfsError(name, exc.strerror or str(exc)) from exc


def _makedirs(path: str, made: set[str], mode: int = 0o755) -> None:
    """`os.makedirs` for a tree this build makes: `made` remembers what exists already.

    The root tmpfs starts empty, so a directory is made once and never looked up again.
    """
    if path in made or not path.startswith(_NEW + "/"):
        return
    _makedirs(posixpath.dirname(path), made)
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass  # made by a bind's target of an earlier plan entry, or a mount below it
    except OSError as exc:
        raise RootfsError(f"create {path.removeprefix(_NEW) or '/'}", exc.strerror or "") from exc
    made.add(path)


def _locked_flags(path: str) -> int:
    flags = os.statvfs(path).f_flag
    return sum(ms for st, ms in _LOCKED_FLAGS if flags & st)


def _bind(
    source: str,
    target: str,
    writable: bool,
    made: set[str],
    *,
    devices: bool = False,
    shown: str = "",
) -> None:
    inside = target.removeprefix(_NEW)
    shown = shown or source.removeprefix(_OLD)
    try:
        is_dir = stat.S_ISDIR(os.stat(source).st_mode)
    except FileNotFoundError:
        raise RootfsError(f"bind {inside}", f"source {shown} does not exist") from None
    except OSError as exc:
        raise RootfsError(f"bind {inside}", exc.strerror or "") from exc
    if is_dir:
        _makedirs(target, made)
    else:
        _makedirs(posixpath.dirname(target), made)
        try:
            os.close(os.open(target, _NEW_FILE, 0o644))
        except OSError as exc:
            raise RootfsError(f"bind {inside}", exc.strerror or "") from exc
    _step(f"bind {inside}", sc.mount, source, target, None, sc.MS_BIND)
    flags = sc.MS_REMOUNT | sc.MS_BIND | sc.MS_NOSUID | _locked_flags(target)
    if not devices:
        flags |= sc.MS_NODEV
    if not writable:
        flags |= sc.MS_RDONLY
    _step(f"remount {inside}", sc.mount, None, target, None, flags)


def _candidate_mount(made: set[str]) -> None:
    root = _NEW + CANDIDATE_ROOT
    _makedirs(root, made)
    # Empty and writable until `seal_candidate` fills and seals it, after the pivot.
    _step(
        "mount candidate tree",
        sc.mount,
        "jigcmd-candidate",
        root,
        "tmpfs",
        sc.MS_NOSUID | sc.MS_NODEV,
        f"mode=0755,size={_CANDIDATE_TREE_BYTES},nr_inodes={_CANDIDATE_TREE_INODES}",
    )


def seal_candidate(files: tuple[tuple[str, str], ...]) -> None:
    """Write the candidate tree inside the finished root, then make it read-only for good."""
    for rel, text in files:
        path = posixpath.join(CANDIDATE_ROOT, rel)
        try:
            os.makedirs(posixpath.dirname(path), mode=0o755, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
            try:
                os.write(fd, text.encode("utf-8"))
            finally:
                os.close(fd)
        except OSError as exc:
            raise RootfsError(f"write candidate file {rel}", exc.strerror or "") from exc
    # Read-only for the whole run: the candidate can neither change, add nor remove a file,
    # and without capabilities (and with mount blocked by seccomp) it cannot remount.
    _step(
        "seal candidate tree",
        sc.mount,
        None,
        CANDIDATE_ROOT,
        None,
        sc.MS_REMOUNT | sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC,
    )


def _scratch(size: int, made: set[str]) -> None:
    _makedirs(_NEW + "/tmp", made)
    _step(
        "mount scratch /tmp",
        sc.mount,
        "jigcmd-scratch",
        _NEW + "/tmp",
        "tmpfs",
        sc.MS_NOSUID | sc.MS_NODEV,
        f"mode=01777,size={size},nr_inodes=16384",
    )


def _dev(made: set[str]) -> None:
    dev = _NEW + "/dev"
    _makedirs(dev, made)
    _step(
        "mount /dev",
        sc.mount,
        "jigcmd-dev",
        dev,
        "tmpfs",
        sc.MS_NOSUID | sc.MS_NOEXEC,
        "mode=0755,size=16k,nr_inodes=64",
    )
    for name in _DEVICES:
        _bind(f"{_OLD}/dev/{name}", f"{dev}/{name}", True, made, devices=True)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        _step(f"link /dev/{name}", os.symlink, target, f"{dev}/{name}")
    _step(
        "seal /dev",
        sc.mount,
        None,
        dev,
        None,
        sc.MS_REMOUNT | sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NOEXEC,
    )


def _memory_view(limit: str, made: set[str]) -> None:
    """Show Bun its real memory limit where it looks for one, under either cgroup version."""
    # Bun reads /proc/self/cgroup, then the v2 or v1 limit file below the cgroup mount; in
    # our cgroup namespace its cgroup is "/", so these two files are the ones it finds.
    # They live on the root tmpfs, which is read-only before the candidate starts.
    data = limit.encode("ascii")
    for view in _MEMORY_VIEWS:
        path = _NEW + view
        _makedirs(posixpath.dirname(path), made)
        try:
            fd = os.open(path, _NEW_FILE | os.O_TRUNC, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            raise RootfsError(f"write {view}", exc.strerror or "") from exc
