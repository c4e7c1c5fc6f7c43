"""The staged runtime: read-only copies of Bun and its libraries on a tmpfs jigcmd owns.

Why: a bind mount shows the candidate, in `/proc/self/mountinfo`, its source's path relative
to the source filesystem's root. Bound straight from the host, Bun's mount would name the
virtual environment it was installed into (a temporary directory, a user's home with the
user's name). Bound from this tmpfs, the same fields say `jigcmd-runtime` and the file's
path inside the envelope (`/opt/bun/bin/bun`), and nothing of the host.

The zygote calls `enter` once, before it forks anything: it gets a mount namespace of its own
(a slave of the host's, so host mounts still reach it and nothing of ours reaches the host)
with the tmpfs at the mount point it was given. Each staged bind's source is copied there
once, under its target path, and the tmpfs is left read-only; every pid 1 forked afterwards
inherits the namespace and binds from the copy (`source_of`). The copy lives as long as a
mount of it does: until the last zygote holding it and the last envelope made from it are
gone. The host's mount point stays an empty directory; removing it would detach the tmpfs.

Zygotes sharing a state directory share one copy (runtimeshare.py). The tmpfs holds a
manifest naming, for each copy, the source file it was made from (`identity`), and while
copies are shared every write to the tmpfs happens with the holders file locked.

Without host root the zygote first makes a user namespace that maps its own ids to
themselves, so that it may mount; envelopes then nest their user namespaces in it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
from collections.abc import Iterator

from jigcmd.envelope import idmap, runtimeshare
from jigcmd.envelope import syscalls as sc
from jigcmd.plan import Bind

__all__ = ["StagingError", "enter", "identity", "mount_point", "source_of", "stage"]

_MODE = 0o555
_CHUNK = 1 << 30
_MANIFEST = ".manifest"

# The mount point (None until `enter`), each staged (source, target) → its copy, what the
# tmpfs's manifest says (target → source identity), and why the last staging failed (what an
# envelope that needed it reports). With a shared copy: the holders file, and its locked fd
# while this process holds the lock.
_root: str | None = None
_copies: dict[tuple[str, str], str] = {}
_manifest: dict[str, str] = {}
_failure: str | None = None
_holders: str | None = None
_lock: int | None = None


class StagingError(OSError):
    """Raised when the staging tmpfs cannot be made or a runtime file cannot be copied."""


def enter(mount_point: str, binds: tuple[Bind, ...] = (), holders: str | None = None) -> None:
    """Give this process a private mount namespace with the staging tmpfs at `mount_point`.

    `binds` are staged at once; a failure to stage them is kept for the envelopes that need
    them (`source_of`). With `holders` (a file in the state directory), a copy another
    zygote made of the very same sources is mounted instead of a new one (runtimeshare.py),
    and this process is listed as holding it.
    """
    global _holders, _lock  # noqa: PLW0603 - one staging area per zygote, inherited by forks
    try:
        os.mkdir(mount_point, mode=0o700)
    except FileExistsError:
        pass  # what it is, is checked where it is mounted on (`_mount_point_fd`)
    except OSError as exc:
        raise StagingError(exc.errno, f"staging at {mount_point}: {exc.strerror}") from exc
    lock = None
    if holders is not None:
        # A holders file that cannot be locked (a read-only state directory): a copy of our own.
        with contextlib.suppress(OSError):
            lock = runtimeshare.lock(holders)
    _holders, _lock = (holders, lock) if lock is not None else (None, None)
    try:
        borrowed = runtimeshare.Borrowed(None, joined=False)
        if lock is not None:
            # Whatever fails while looking (the holders file unreadable): a copy of our own.
            with contextlib.suppress(OSError):
                borrowed = runtimeshare.borrow(lock, mount_point, lambda where: _fits(where, binds))
        _mount(mount_point, borrowed)
        with contextlib.suppress(StagingError):
            stage(binds)
        if lock is not None and _failure is None:
            with contextlib.suppress(OSError):
                runtimeshare.register(lock)
    finally:
        _lock = None
        if lock is not None:
            os.close(lock)


def _fits(where: str | int, binds: tuple[Bind, ...]) -> bool:
    """Whether the manifest at `where` names our very source for every staged bind."""
    try:
        manifest = _read_manifest(where)
        wanted = {bind.target: identity(bind.source) for bind in binds if bind.staged}
    except (OSError, ValueError):
        return False
    return all(manifest.get(target) == source for target, source in wanted.items())


def _mount(mount_point: str, borrowed: runtimeshare.Borrowed) -> None:
    """The private namespace, with the borrowed tmpfs or a new one mounted."""
    global _root  # noqa: PLW0603 - see `enter`
    try:
        if os.geteuid() != 0 and not borrowed.joined:
            _own_user_namespace()
        else:
            sc.unshare(sc.CLONE_NEWNS)
        # Slave: host mounts (a new state directory, a cgroup mount) still propagate in, and
        # nothing mounted from here on propagates out.
        sc.mount(None, "/", None, sc.MS_REC | sc.MS_SLAVE)
        if borrowed.joined:
            # This namespace is a copy of the holder's: its staging mount, with the template
            # roots on it, came along. Ours replaces it.
            sc.umount2(mount_point, sc.MNT_DETACH | sc.UMOUNT_NOFOLLOW)
        # Opened only now: a descriptor opened before `unshare` names the host's mount, onto
        # which this namespace cannot mount.
        point = _mount_point_fd(mount_point)
        try:
            if borrowed.tree is not None:
                sc.move_mount(borrowed.tree, point, mount_point)
            else:
                sc.mount(
                    runtimeshare.SOURCE_NAME,
                    f"/proc/self/fd/{point}",
                    "tmpfs",
                    sc.MS_NOSUID | sc.MS_NODEV | sc.MS_RDONLY,
                    "mode=0755,nr_inodes=256",
                )
        finally:
            os.close(point)
    except StagingError:
        raise
    except OSError as exc:
        raise StagingError(exc.errno, f"staging tmpfs at {mount_point}: {exc.strerror}") from exc
    finally:
        if borrowed.tree is not None:
            os.close(borrowed.tree)
    _root = mount_point
    _manifest.clear()
    if borrowed.tree is not None:
        _manifest.update(_read_manifest(_root))


def _mount_point_fd(mount_point: str) -> int:
    """The directory `mount_point`, opened with no link followed: what the tmpfs goes onto.

    A link there (`<state dir>/runtime -> /usr/bin`) would have the tmpfs cover its target in
    this namespace, and every envelope made from it fail or see the copy there.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(mount_point, flags)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        what = "a symbolic link" if os.path.islink(mount_point) else "not a directory"
        raise StagingError(
            exc.errno,
            f"staging at {mount_point}: it is {what}; remove it (jigcmd makes it 0700 itself)",
        ) from None


def identity(source: str) -> str:
    """What names the file at `source` (links followed): its inode, size and change times."""
    st = os.stat(source)
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def stage(binds: tuple[Bind, ...]) -> None:
    """Copy every staged bind not copied yet onto the staging tmpfs (read-only again after)."""
    global _failure  # noqa: PLW0603 - see `_failure`
    try:
        _stage(binds)
    except StagingError as exc:
        _failure = str(exc)
        raise
    _failure = None


def _stage(binds: tuple[Bind, ...]) -> None:
    missing = [bind for bind in binds if bind.staged and (bind.source, bind.target) not in _copies]
    if not missing:
        return
    if _root is None:
        raise StagingError("the runtime must be staged, but this process has no staging tmpfs")
    root = _root
    try:
        wanted = [(bind, identity(bind.source)) for bind in missing]
    except OSError as exc:
        raise StagingError(exc.errno, f"staging from {exc.filename}: {exc.strerror}") from exc
    if all(_manifest.get(bind.target) == source for bind, source in wanted):
        _note(root, wanted)
        return
    with _writable(root):
        for bind, source in wanted:
            known = _manifest.get(bind.target)
            copy = posixpath.join(root, bind.target.lstrip("/"))
            if known is None and not os.path.lexists(copy):
                _copy_one(bind, copy)
                _manifest[bind.target] = source
            elif known != source:
                # Two sources for one target (never from one runtime): refuse, do not guess.
                raise StagingError(f"two staged sources for {bind.target}")
        _write_manifest(root)
    _note(root, wanted)


def _note(root: str, wanted: list[tuple[Bind, str]]) -> None:
    for bind, _ in wanted:
        _copies[(bind.source, bind.target)] = posixpath.join(root, bind.target.lstrip("/"))


def _copy_one(bind: Bind, copy: str) -> None:
    try:
        os.makedirs(posixpath.dirname(copy), mode=0o755, exist_ok=True)
        _copy(bind.source, copy)
        os.chmod(copy, _MODE)
    except OSError as exc:
        raise StagingError(
            exc.errno, f"staging {bind.target} from {bind.source}: {exc.strerror}"
        ) from exc


def _read_manifest(where: str | int) -> dict[str, str]:
    """The manifest of the tmpfs at `where` (a path, or a directory fd): target → identity."""
    try:
        if isinstance(where, int):
            fd = os.open(_MANIFEST, os.O_RDONLY | os.O_CLOEXEC, dir_fd=where)
        else:
            fd = os.open(posixpath.join(where, _MANIFEST), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    with os.fdopen(fd, "r", encoding="utf-8") as manifest:
        lines = manifest.read().splitlines()
    return dict(line.split("\t", 1) for line in lines if "\t" in line)


def _write_manifest(root: str) -> None:
    path = posixpath.join(root, _MANIFEST)
    data = "".join(f"{target}\t{source}\n" for target, source in sorted(_manifest.items()))
    try:
        with open(path + ".new", "w", encoding="utf-8") as manifest:
            manifest.write(data)
        os.chmod(path + ".new", 0o444)
        os.replace(path + ".new", path)
    except OSError as exc:
        raise StagingError(exc.errno, f"writing the staging manifest: {exc.strerror}") from exc


@contextlib.contextmanager
def _locked() -> Iterator[int | None]:
    """The holders file's lock (None when nothing is shared), taken once however nested."""
    global _lock  # noqa: PLW0603 - see `_lock`
    if _holders is None or _lock is not None:
        yield _lock
        return
    try:
        fd = runtimeshare.lock(_holders)
    except OSError as exc:
        raise StagingError(exc.errno, f"locking {_holders}: {exc.strerror}") from exc
    _lock = fd
    try:
        yield fd
    finally:
        _lock = None
        os.close(fd)


@contextlib.contextmanager
def _writable(root: str) -> Iterator[None]:
    """The tmpfs writable while the block runs, the manifest as others may have left it."""
    with _locked():
        if _holders is not None:
            _manifest.update(_read_manifest(root))
        _remount(root, writable=True)
        try:
            yield
        finally:
            _remount(root, writable=False)


def mount_point(name: str) -> str | None:
    """An empty directory `name` on the staging tmpfs, for a mount of this namespace only.

    None before `enter`: then this process shares the host's mount namespace, and whatever
    it mounted would be the host's (rootfs.py's template roots need one of their own).
    Zygotes sharing the tmpfs share these directories, not what each mounts on them.
    """
    if _root is None:
        return None
    path = posixpath.join(_root, "." + name)
    if not os.path.isdir(path):
        with _writable(_root):
            try:
                os.makedirs(path, 0o700, exist_ok=True)
            except OSError as exc:
                raise StagingError(exc.errno, f"making {name} for a mount: {exc.strerror}") from exc
    return path


def _copy(source: str, target: str) -> None:
    """Copy the file at `source` (links followed) to a new file `target`, in the kernel.

    Not shutil: the zygote's image is what every pid 1 is cloned from, and shutil brings
    bz2, lzma and fnmatch into it (see docs/envelope.md).
    """
    src = os.open(source, os.O_RDONLY | os.O_CLOEXEC)
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            while os.sendfile(dst, src, None, _CHUNK):
                pass
        finally:
            os.close(dst)
    finally:
        os.close(src)


def source_of(bind: Bind) -> str:
    """Where pid 1 binds `bind` from: its staged copy, or its source when it is not staged."""
    if not bind.staged:
        return bind.source
    copy = _copies.get((bind.source, bind.target))
    if copy is None:
        # Falling back to the host path would show it to the candidate: fail closed instead.
        raise StagingError(_failure or f"{bind.target} was not staged before preparing")
    return copy


def _remount(root: str, *, writable: bool) -> None:
    flags = sc.MS_REMOUNT | sc.MS_NOSUID | sc.MS_NODEV | (0 if writable else sc.MS_RDONLY)
    try:
        sc.mount(None, root, None, flags, "mode=0755,nr_inodes=256")
    except OSError as exc:
        raise StagingError(exc.errno, f"remounting the staging tmpfs: {exc.strerror}") from exc


def _own_user_namespace() -> None:
    """Without root: a user namespace mapping our own uid and gid to themselves, to mount in."""
    ids = (os.geteuid(), os.getegid())
    sc.unshare(sc.CLONE_NEWUSER | sc.CLONE_NEWNS)
    idmap.map_ids("self", inside=ids, outside=ids)
