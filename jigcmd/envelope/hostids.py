"""Which host uid and gid an envelope runs as: as root, one of its own, leased host-wide.

The kernel keeps some counts per host user (`user_struct`), in no user namespace or cgroup:
the descriptors in flight in `SCM_RIGHTS` messages (`unix_inflight`, refused past the
sender's `RLIMIT_NOFILE` with ETOOMANYREFS) and the pages of pipe buffers among them. When
every envelope ran as host uid 65534, one candidate holding ~500 descriptors in flight made
every other envelope's `sendmsg(SCM_RIGHTS)`, and every host `nobody` process's, fail. So
each envelope of a candidate runs as a host uid (and gid, the same number) no one else has
while it lives:

- taken from `RANGE`, 65,536 ids at 0x72000000 inside 1879048192-2147352575, which systemd
  documents as unused (systemd.io/UIDS-GIDS: below its foreign range, above its container
  ranges, far above shadow's `/etc/subuid` defaults, 100000-600100000, and below 2^31,
  past which tools misread ids as negative). Where this process's user namespace does not
  map that block (a container with a user namespace of 65,536 ids), `SMALL_RANGE`: 606
  ids in 60578-61183, unused in systemd's table too;
- leased with an `flock` on `/run/jigcmd/hostids/<id>`, a host-wide directory, so that
  servers with different state directories never share an id; the lease starts at a random
  id of the range, so that an id just let go is not the next one taken;
- held by the zygote until the envelope's job is confirmed empty and removed
  (`Holdings.release`), so an id is leased again only once every process of its envelope
  is gone; a release that proves nothing keeps the lease for the zygote's life. If the
  zygote dies, pid 1 dies with it (`PR_SET_PDEATHSIG`) and the kernel kills the rest of
  its namespace; the file it leaves holds no lock (the id is free) and goes with the id's
  next lease, or with the next recovery pass (`sweep`), whichever comes first.

Rootless, the kernel lets a process map only its own ids: the envelope runs as the server's
user. Jarvis's runs (profile "host") keep host uid 65534: the files a run writes in a
writable working directory need one owner from run to run (docs/jarvis.md).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
from typing import NamedTuple

from jigcmd.envelope import idmap

__all__ = [
    "DIRECTORY",
    "NOBODY",
    "RANGE",
    "SMALL_RANGE",
    "HostIdError",
    "HostIds",
    "lease_range",
    "let_go",
    "sweep",
    "take",
]

# (first id, count).
RANGE = (0x72000000, 0x10000)
SMALL_RANGE = (60578, 606)
# Jarvis's runs, as documented: the owner of what they write.
NOBODY = 65534
DIRECTORY = "/run/jigcmd/hostids"


class HostIdError(Exception):
    """Raised when no host id can be leased: no directory to lease in, or every id taken.

    `path` is the directory at fault when it is the lease directory or one above it that
    cannot be made or trusted (the doctor words its fix by it); "" otherwise.
    """

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class HostIds(NamedTuple):
    """The host uid and gid an envelope's 0 maps to, and its lease (-1: none)."""

    uid: int
    gid: int
    lease: int = -1


def take(profile: str) -> HostIds:
    """The host ids of an envelope of `profile`; a lease of its own for a candidate as root."""
    if idmap.rootless():
        return HostIds(os.geteuid(), os.getegid())
    if profile != "candidate":
        return HostIds(NOBODY, NOBODY)
    first, count = lease_range()
    directory = _directory()
    # os.urandom, not `secrets`: that imports hashlib into the zygote's image.
    start = int.from_bytes(os.urandom(4), "little") % count
    for step in range(count):
        host_id = first + (start + step) % count
        fd = _lease(directory, str(host_id))
        if fd >= 0:
            return HostIds(host_id, host_id, fd)
    raise HostIdError(f"every host id of {first}-{first + count - 1} is leased ({DIRECTORY})")


def let_go(ids: HostIds) -> None:
    """End the lease of `ids` (its envelope is gone): its file goes, then the lock."""
    if ids.lease < 0:
        return
    # Removed while still locked: whoever opened it meanwhile sees, once it holds the lock,
    # that the name is no longer its file (`_lease`), and takes a fresh one.
    with contextlib.suppress(OSError, HostIdError):
        os.unlink(str(ids.uid), dir_fd=_directory())
    os.close(ids.lease)


def sweep() -> tuple[int, list[str]]:
    """Remove the lease files no one holds (their zygote was killed): how many, and problems.

    Only names a lease has (an id of the range, in its one decimal spelling) are touched, so
    the name locked is the name removed; an entry that cannot be locked is named and skipped.
    Never raises: a sweep only tidies (an unheld file's id is free to lease anyway).
    """
    if idmap.rootless() or not os.path.isdir(DIRECTORY):
        return 0, []
    try:
        directory = _directory()
        first, count = lease_range()
        names = os.listdir(directory)
    except (HostIdError, OSError) as exc:
        return 0, [str(exc)]
    removed, problems = 0, []
    for name in names:
        if not (name.isascii() and name.isdigit() and str(int(name)) == name):
            continue
        if not first <= int(name) < first + count:
            continue
        # Locked as a lease is, then removed as one ends: a process opening the name
        # meanwhile sees, once it holds the lock, that the name is no longer its file.
        try:
            fd = _lease(directory, name, create=False)
        except HostIdError as exc:
            problems.append(str(exc))
            continue
        if fd >= 0:
            let_go(HostIds(int(name), int(name), fd))
            removed += 1
    return removed, problems


def _lease(directory: int, name: str, *, create: bool = True) -> int:
    """The locked descriptor of lease `name`, or -1 when another process holds it (or, not
    to `create` it, when there is no such file: a sweep never makes the file it counts)."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    flags |= os.O_CREAT if create else 0
    while True:
        try:
            fd = os.open(name, flags, 0o600, dir_fd=directory)
        except OSError as exc:
            if not create and exc.errno == errno.ENOENT:
                return -1
            raise HostIdError(f"lease {DIRECTORY}/{name}: {exc.strerror}", DIRECTORY) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return -1
        except OSError as exc:
            os.close(fd)
            raise HostIdError(f"lease {DIRECTORY}/{name}: {exc.strerror}", DIRECTORY) from exc
        try:
            named = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            named = None
        held = os.fstat(fd)
        if named is not None and (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino):
            return fd
        # Locked a file its last holder removed as it let go: try the name again.
        os.close(fd)
        if not create:
            return -1


_directory_fd = -1


def _directory() -> int:
    """`DIRECTORY`, made if missing and held open: root's alone, or no lease is trusted."""
    global _directory_fd  # noqa: PLW0603 - opened once per process, held for its life
    if _directory_fd < 0:
        fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        path = ""
        try:
            for part in DIRECTORY.strip("/").split("/"):
                path = f"{path}/{part}"
                below = _open_own(fd, part, path)
                os.close(fd)
                fd = below
        except BaseException:
            os.close(fd)
            raise
        _directory_fd = fd
    return _directory_fd


def _open_own(parent: int, name: str, path: str) -> int:
    """Directory `name` (at `path`) below `parent`, made (0755) if missing; refused unless
    root's alone. Errors name `path`, the component at fault, not the lease directory."""
    try:
        os.mkdir(name, 0o755, dir_fd=parent)
    except FileExistsError:
        pass
    except OSError as exc:
        raise HostIdError(
            f"host id leases: cannot make {path}: {exc.strerror or exc}", path
        ) from exc
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent
        )
    except OSError as exc:
        raise HostIdError(f"host id leases: {path}: {exc.strerror}", path) from exc
    info = os.fstat(fd)
    # /run is root's and sticky-free on every host; anything else writable by another user
    # could hold a lease, or swap a lease file, that no envelope of ours holds.
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.close(fd)
        raise HostIdError(
            f"host id leases: {path} must be root's and writable by root alone "
            f"(owner uid {info.st_uid}, mode {stat.S_IMODE(info.st_mode):o})",
            path,
        )
    return fd


_chosen: tuple[int, int] | None = None


def lease_range() -> tuple[int, int]:
    """`RANGE` if this user namespace maps all of it (uids and gids), else `SMALL_RANGE`."""
    global _chosen  # noqa: PLW0603 - this process's user namespace, read once
    if _chosen is not None:
        return _chosen
    for first, count in (RANGE, SMALL_RANGE):
        if all(_mapped(kind, first, count) for kind in ("uid_map", "gid_map")):
            _chosen = (first, count)
            return _chosen
    raise HostIdError(
        "host id leases: this user namespace maps neither "
        f"{RANGE[0]}-{RANGE[0] + RANGE[1] - 1} nor {SMALL_RANGE[0]}-{sum(SMALL_RANGE) - 1}"
    )


def _mapped(kind: str, first: int, count: int) -> bool:
    """Whether `/proc/self/<kind>` maps every id of first..first+count-1 of this namespace."""
    try:
        with open(f"/proc/self/{kind}", encoding="ascii") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return True  # no user namespaces at all: every id is the host's
        raise HostIdError(f"host id leases: /proc/self/{kind}: {exc.strerror}") from exc
    for line in lines:
        inside, _outside, length = (int(part) for part in line.split())
        if inside <= first and first + count <= inside + length:
            return True
    return False
