"""Build the envelope's minimal root inside a fresh mount namespace, then pivot into it.

Runs in the pid-1 init, which is root of its own user namespace. The order below is the
result of measurement; each step says why it sits where it does.

1. Make every inherited mount private, so nothing we do propagates to the host.
2. Mount a tmpfs over `/tmp` and pivot into it with the host tree at `/oldroot`. From then
   on every host path is reachable as `/oldroot/<path>`, even one that our own mounts would
   shadow (a venv under `/tmp`, say). This is bubblewrap's double-pivot, re-derived.
3. Build `/newroot` on its own tmpfs: read-only binds, the candidate tree, scratch, `/dev`,
   a truthful read-only memory-limit view for Bun and, for a candidate, jigcmd's own `/etc`
   (etcfiles.py).
4. Mount `/proc` *before* the old root is detached: the kernel refuses a fresh procfs in a
   user namespace unless a fully visible procfs exists in the mount namespace ("mount too
   revealing", EPERM).
5. Remount `/newroot` read-only, pivot into it and detach the old root lazily.

For the candidate profile the part of the root that is the same for every envelope of a
shape (the staged runtime's binds, `/dev`, the memory view, `/etc`, the empty mount points) is a
*template*, built once by the zygote in its own mount namespace (`template`) and read-only
from then on; pid 1 binds a copy of it and mounts only its own scratch, candidate tree and
`/proc` on top (`enter_template`): 11 mount operations instead of ~30, and no directory
or file to make. The host profile's binds name host directories that may change between
runs, so its root is built per run.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Mapping

from jigcmd.envelope import staging
from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.candidatetree import mount_candidate_tree
from jigcmd.envelope.etcfiles import ETC_FILES
from jigcmd.envelope.failure import StepError
from jigcmd.envelope.roottree import NEW_FILE, RootfsError, Tree, step, write_new_files
from jigcmd.plan import CANDIDATE_ROOT, RunPlan

__all__ = ["RootfsError", "build_root", "enter_template", "template"]

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
_MEMORY_VIEWS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
_ROOT_TMPFS = "mode=0755,size=256k,nr_inodes=1024"
_ROOT_FLAGS = sc.MS_NOSUID | sc.MS_NODEV
# Templates kept mounted in the zygote, by (binds, memory limit); a shape change makes one.
_MAX_TEMPLATES = 4
_templates: dict[tuple[object, ...], str] = {}
_template_slot = 0


def build_root(plan: RunPlan, sources: Mapping[str, int], memory_limit: str) -> None:
    """Leave the calling process pivoted into the finished envelope root.

    `sources` maps each bind source to an O_PATH descriptor opened by pid 1 while it was
    still host uid 0: init (its envelope's own host uid, hostids.py) may lack search
    permission on the way to a source (a venv under a 0700 home), but binding from the
    descriptor needs none.
    `memory_limit` is the limit as the kernel reported it when the cgroup was made.
    """
    tree = Tree(_NEW)
    _base()
    step(
        "mount root tmpfs",
        sc.mount,
        "jigcmd-root",
        _NEW,
        "tmpfs",
        sc.MS_NOSUID | sc.MS_NODEV,
        _ROOT_TMPFS,
    )
    # Scratch first: a bind below /tmp (a jarvis working directory) must land on top of it.
    tree.makedirs(_NEW + "/tmp")
    _scratch(_NEW, plan.limits.scratch_bytes)
    for bind in plan.binds:
        fd = sources.get(bind.source)
        source = _OLD + (f"/proc/self/fd/{fd}" if fd is not None else bind.source)
        _bind(tree, source, bind.target, bind.writable, shown=bind.source)
    if plan.profile == "candidate":
        tree.makedirs(_NEW + CANDIDATE_ROOT)
        mount_candidate_tree(_NEW)
        # A host plan's /etc is the host's, bound by its policy (jarvis's host_dirs) or absent.
        write_new_files(tree, ETC_FILES, "/etc/")
    _dev(tree, _OLD)
    _memory_view(tree, memory_limit)
    tree.makedirs(_NEW + "/proc")
    _proc(_NEW)
    step(
        "remount root read-only",
        sc.mount,
        None,
        _NEW,
        None,
        sc.MS_REMOUNT | sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV,
    )
    _pivot(_NEW)


def _base() -> None:
    """Steps 1 and 2 of the module docstring: the host's tree at /oldroot, /newroot empty."""
    step("make mounts private", sc.mount, None, "/", None, sc.MS_REC | sc.MS_PRIVATE)
    step(
        "mount base tmpfs",
        sc.mount,
        "jigcmd",
        _BASE,
        "tmpfs",
        sc.MS_NOSUID | sc.MS_NODEV,
        "mode=0700,size=64k",
    )
    step("create old-root directory", os.mkdir, _BASE + _OLD, 0o700)
    step("create new-root directory", os.mkdir, _BASE + _NEW, 0o755)
    step("pivot into base tmpfs", sc.pivot_root, _BASE, _BASE + _OLD)
    step("chdir to base", os.chdir, "/")


def template(plan: RunPlan, memory_limit: str) -> str | None:
    """The template root for envelopes shaped like `plan`, made now if need be (the zygote).

    None for the host profile, and where this process has no mount namespace of its own
    (no staging tmpfs, see staging.py): pid 1 then builds its root with `build_root`.
    Raises StepError naming the step when the template cannot be made (nothing is left).
    """
    global _template_slot  # noqa: PLW0603 - the zygote's templates, inherited by every pid 1
    if plan.profile != "candidate":
        return None
    key = (plan.binds, memory_limit)
    found = _templates.get(key)
    if found is not None:
        return found
    try:
        root = staging.mount_point(f"root-{_template_slot % _MAX_TEMPLATES}")
    except staging.StagingError as exc:
        raise StepError("root template", exc) from exc
    if root is None:
        return None
    for old, path in list(_templates.items()):
        if path == root:
            # The slot's previous template: envelopes cloned from it hold their own copy.
            del _templates[old]
            _unmount(root)
    _template_slot += 1
    try:
        _build_template(root, plan, memory_limit)
    except staging.StagingError as exc:
        _unmount(root)
        raise StepError("open bind sources", exc) from exc
    except RootfsError as exc:
        _unmount(root)
        raise StepError(f"root filesystem: {exc.step}", str(exc).partition(": ")[2]) from exc
    _templates[key] = root
    return root


def _build_template(root: str, plan: RunPlan, memory_limit: str) -> None:
    tree = Tree(root)
    step("mount root tmpfs", sc.mount, "jigcmd-root", root, "tmpfs", _ROOT_FLAGS, _ROOT_TMPFS)
    tree.makedirs(root + "/tmp")
    for bind in plan.binds:
        _bind(tree, staging.source_of(bind), bind.target, bind.writable, shown=bind.source)
    tree.makedirs(root + CANDIDATE_ROOT)
    write_new_files(tree, ETC_FILES, "/etc/")
    _dev(tree, "")
    _memory_view(tree, memory_limit)
    tree.makedirs(root + "/proc")
    # Read-only for good, the superblock too: every envelope of the shape shares this
    # tmpfs, and its owner (the zygote's user namespace) is not the envelopes'.
    step(
        "remount root read-only",
        sc.mount,
        None,
        root,
        None,
        sc.MS_REMOUNT | sc.MS_RDONLY | _ROOT_FLAGS,
    )


def _unmount(root: str) -> None:
    with contextlib.suppress(OSError):
        sc.umount2(root, sc.MNT_DETACH)


def enter_template(template_fd: int, plan: RunPlan) -> None:
    """Leave the calling process (pid 1) pivoted into a copy of a template root.

    `template_fd` is an O_PATH descriptor of the template (see `template`) that pid 1 took
    while still host uid 0, like its bind sources (see `build_root`). The copy is a
    recursive bind in pid 1's own mount namespace (the top of a bind is never locked, so
    pivot_root accepts it); the template's own mounts come along read-only and locked
    (they were made in a more privileged namespace): neither pid 1 nor the candidate can
    unmount or loosen them. Only the run's own scratch, candidate tree and /proc are new.
    """
    _base()
    source = f"{_OLD}/proc/self/fd/{template_fd}"
    step("bind root template", sc.mount, source, _NEW, None, sc.MS_BIND | sc.MS_REC)
    _scratch(_NEW, plan.limits.scratch_bytes)
    mount_candidate_tree(_NEW)
    _proc(_NEW)
    _pivot(_NEW)


def _proc(root: str) -> None:
    # Before the old root goes: see the module docstring, step 4.
    step(
        "mount /proc",
        sc.mount,
        "proc",
        root + "/proc",
        "proc",
        sc.MS_NOSUID | sc.MS_NODEV | sc.MS_NOEXEC,
        "hidepid=invisible,subset=pid",
    )


def _pivot(root: str) -> None:
    step("chdir to new root", os.chdir, root)
    # pivot_root(".", ".") stacks the old root on top of the new one; detaching "." then
    # drops the old root (host tree and base tmpfs) without needing a directory for it.
    step("pivot into new root", sc.pivot_root, ".", ".")
    step("detach old root", sc.umount2, ".", sc.MNT_DETACH)
    step("chdir to new root", os.chdir, "/")


def _locked_flags(path: str) -> int:
    flags = os.statvfs(path).f_flag
    return sum(ms for st, ms in _LOCKED_FLAGS if flags & st)


def _bind(
    tree: Tree,
    source: str,
    inside: str,
    writable: bool,
    *,
    devices: bool = False,
    shown: str = "",
) -> None:
    target = tree.root + inside
    shown = shown or source.removeprefix(_OLD)
    try:
        is_dir = stat.S_ISDIR(os.stat(source).st_mode)
    except FileNotFoundError:
        raise RootfsError(f"bind {inside}", f"source {shown} does not exist") from None
    except OSError as exc:
        raise RootfsError(f"bind {inside}", exc.strerror or "") from exc
    if is_dir:
        tree.makedirs(target)
    else:
        tree.makedirs(posixpath.dirname(target))
        try:
            os.close(os.open(target, NEW_FILE, 0o644))
        except OSError as exc:
            raise RootfsError(f"bind {inside}", exc.strerror or "") from exc
    try:
        sc.mount(source, target, None, sc.MS_BIND)
    except OSError as exc:
        raise RootfsError(f"bind {inside}", _bind_refused(exc, shown, is_dir)) from exc
    flags = sc.MS_REMOUNT | sc.MS_BIND | sc.MS_NOSUID | _locked_flags(target)
    if not devices:
        flags |= sc.MS_NODEV
    if not writable:
        flags |= sc.MS_RDONLY
    step(f"remount {inside}", sc.mount, None, target, None, flags)


def _bind_refused(exc: OSError, shown: str, is_dir: bool) -> str:
    """Why the kernel refused to bind `shown`, in words that say what to change.

    A bind is not recursive, and the kernel refuses one (EINVAL) of a directory with a mount
    inside it that came from a more privileged namespace: what that mount hides would show.
    """
    below = _mount_below(shown) if is_dir and exc.errno == errno.EINVAL else None
    if below is None:
        return exc.strerror or str(exc)
    return (
        f"{shown} holds a mount ({below}), and the kernel binds a directory only with the "
        "mounts inside it, which the envelope never shows; choose a directory that holds none"
    )


def _mount_below(directory: str) -> str | None:
    """A mount point strictly below host `directory` (seen below /oldroot), if one is found."""
    inside = f"{_OLD}{directory.rstrip('/')}/"
    try:
        with open(f"{_OLD}/proc/self/mountinfo", encoding="utf-8", errors="replace") as lines:
            for line in lines:
                fields = line.split(" ", 5)
                if len(fields) > 4 and fields[4].startswith(inside):
                    return fields[4].removeprefix(_OLD)
    except OSError:
        return None
    return None


def _scratch(root: str, size: int) -> None:
    step(
        "mount scratch /tmp",
        sc.mount,
        "jigcmd-scratch",
        root + "/tmp",
        "tmpfs",
        sc.MS_NOSUID | sc.MS_NODEV,
        f"mode=01777,size={size},nr_inodes=16384",
    )


def _dev(tree: Tree, host: str) -> None:
    """A /dev of three devices (nodes of its own, else binds of the host's /dev below
    `host`) and four links."""
    dev = tree.root + "/dev"
    tree.makedirs(dev)
    step(
        "mount /dev",
        sc.mount,
        "jigcmd-dev",
        dev,
        "tmpfs",
        sc.MS_NOSUID | sc.MS_NOEXEC,
        "mode=0755,size=16k,nr_inodes=64",
    )
    for name in _DEVICES:
        source, inside = f"{host}/dev/{name}", f"/dev/{name}"
        if not _own_device(source, tree.root + inside, inside):
            # Read-only: the device still reads and writes, but its inode is the host's, and
            # a writable bind let a candidate set the host's /dev/null times (utimensat).
            _bind(tree, source, inside, False, devices=True, shown=inside)
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        step(f"link /dev/{name}", os.symlink, target, f"{dev}/{name}")
    step(
        "seal /dev",
        sc.mount,
        None,
        dev,
        None,
        sc.MS_REMOUNT | sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NOEXEC,
    )


def _own_device(source: str, target: str, inside: str) -> bool:
    """Make `target` a node of the device `source` is, on this tmpfs; False where it cannot.

    A bind shares the host's inode: an inotify watch on it sees every host open and write of
    /dev/null. A node of its own is seen only by the envelopes sharing the template. Only
    host root (the zygote) makes one: in a user namespace `mknod` fails (CAP_MKNOD counts in
    the initial one only), and pid 1 binds.
    """
    try:
        found = os.stat(source)
    except OSError:
        return False  # the bind names what is wrong with the source
    try:
        os.mknod(target, stat.S_IFCHR | 0o666, found.st_rdev)
    except PermissionError:
        return False
    except OSError as exc:
        raise RootfsError(f"make {inside}", exc.strerror or str(exc)) from exc
    try:
        os.chmod(target, 0o666)  # noqa: S103 - everyone's, as the host's is (past the umask)
        # Opened once: a node that a device cgroup refuses is bound instead (and refused so).
        os.close(os.open(target, os.O_RDWR | os.O_CLOEXEC))
    except OSError:
        os.unlink(target)
        return False
    return True


def _memory_view(tree: Tree, limit: str) -> None:
    """Show Bun its real memory limit where it looks for one, under either cgroup version."""
    # Bun reads /proc/self/cgroup, then the v2 or v1 limit file below the cgroup mount; in
    # our cgroup namespace its cgroup is "/", so these two files are the ones it finds.
    data = limit.encode("ascii")
    write_new_files(tree, tuple((view, data) for view in _MEMORY_VIEWS), "")
