"""The staged runtime: read-only copies of Bun and its libraries on a tmpfs jigcmd owns.

Why: a bind mount shows the candidate, in `/proc/self/mountinfo`, its source's path relative
to the source filesystem's root. Bound straight from the host, Bun's mount would name the
virtual environment it was installed into (a temporary directory, a user's home with the
user's name). Bound from this tmpfs, the same fields say `jigcmd-runtime` and the file's
path inside the envelope (`/opt/bun/bin/bun`), and nothing of the host.

The zygote calls `enter` once, before it forks anything: it gets a mount namespace of its own
(a slave of the host's, so host mounts still reach it and nothing of ours reaches the host)
with an empty tmpfs at the mount point it was given. `stage` copies each staged bind's source
there once, under its target path, and leaves the tmpfs read-only; every supervisor and pid 1
forked afterwards inherits the namespace and binds from the copy (`source_of`). The copy
lives as long as the namespace: until the zygote and the last envelope it made are gone.
The host's mount point stays an empty directory; removing it would detach the tmpfs.

Without host root the zygote first makes a user namespace that maps its own ids to
themselves, so that it may mount; envelopes then nest their user namespaces in it.
"""

from __future__ import annotations

import os
import posixpath

from jigcmd.envelope import idmap
from jigcmd.envelope import syscalls as sc
from jigcmd.plan import Bind

__all__ = ["StagingError", "enter", "mount_point", "source_of", "stage"]

_FSTYPE_NAME = "jigcmd-runtime"
_MODE = 0o555
_CHUNK = 1 << 30

# The mount point (None until `enter`), each staged (source, target) → its copy, and why the
# last staging failed (what an envelope that needed it reports).
_root: str | None = None
_copies: dict[tuple[str, str], str] = {}
_failure: str | None = None


class StagingError(OSError):
    """Raised when the staging tmpfs cannot be made or a runtime file cannot be copied."""


def enter(mount_point: str) -> None:
    """Give this process a private mount namespace with the staging tmpfs at `mount_point`."""
    global _root  # noqa: PLW0603 - one staging area per zygote, inherited by its forks
    try:
        os.makedirs(mount_point, mode=0o700, exist_ok=True)
        if os.geteuid() != 0:
            _own_user_namespace()
        else:
            sc.unshare(sc.CLONE_NEWNS)
        # Slave: host mounts (a new state directory, a cgroup mount) still propagate in, and
        # nothing mounted from here on propagates out.
        sc.mount(None, "/", None, sc.MS_REC | sc.MS_SLAVE)
        sc.mount(
            _FSTYPE_NAME,
            mount_point,
            "tmpfs",
            sc.MS_NOSUID | sc.MS_NODEV | sc.MS_RDONLY,
            "mode=0755,nr_inodes=256",
        )
    except OSError as exc:
        raise StagingError(exc.errno, f"staging tmpfs at {mount_point}: {exc.strerror}") from exc
    _root = mount_point


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
    _remount(root, writable=True)
    try:
        for bind in missing:
            copy = posixpath.join(root, bind.target.lstrip("/"))
            if os.path.lexists(copy):
                # Two sources for one target (never from one runtime): refuse, do not guess.
                raise StagingError(f"two staged sources for {bind.target}")
            try:
                os.makedirs(posixpath.dirname(copy), mode=0o755, exist_ok=True)
                _copy(bind.source, copy)
                os.chmod(copy, _MODE)
            except OSError as exc:
                raise StagingError(
                    exc.errno, f"staging {bind.target} from {bind.source}: {exc.strerror}"
                ) from exc
            _copies[(bind.source, bind.target)] = copy
    finally:
        _remount(root, writable=False)


def mount_point(name: str) -> str | None:
    """An empty directory `name` on the staging tmpfs, for a mount of this namespace only.

    None before `enter`: then this process shares the host's mount namespace, and whatever
    it mounted would be the host's (rootfs.py's template roots need one of their own).
    """
    if _root is None:
        return None
    path = posixpath.join(_root, "." + name)
    if not os.path.isdir(path):
        _remount(_root, writable=True)
        try:
            os.mkdir(path, 0o700)
        except OSError as exc:
            raise StagingError(exc.errno, f"making {name} for a mount: {exc.strerror}") from exc
        finally:
            _remount(_root, writable=False)
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
