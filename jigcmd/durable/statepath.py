"""Whether a state directory's path can be trusted: every component from `/` down.

Checking the directory alone is not enough: whoever may rename or replace any directory on
its path may point the path somewhere else after the check (`state -> /etc`), and root
would write its journal, slots and resources there. So, as OpenSSH's StrictModes does,
each component must be owned by root or by the effective user, and must not be writable by
group or others, unless it is a sticky directory (like `/tmp`) and the next component is
the effective user's own or root's (the sticky bit keeps others from renaming or removing
it).

A symbolic link on the path is followed, not refused: `/var/lib/jigcmd -> /srv/jigcmd` is a
common layout, and the link is as safe as the directory holding it (checked before it).
Its target is then checked component by component in the same way, and the path returned
is the resolved one, which every later open uses.

The whole path is judged before anything is made (`walk`): the components that exist are
checked, and the deepest of them must be fit to hold what is made in it (no one else may
write it, this user may). So a refused path creates nothing, and `jigcmd doctor` asks the
same question without making anything. Below a directory not made yet there is no link to
follow, so the rest of the path is read as written: `nonex/../x` is `x`, `nonex` never made.
What is missing is then made one directory at a time inside the one judged last, held open
(mkdirat, never by path name), and judged itself before anything is made below it: a link
another user plants in /tmp after the walk is refused, never followed.
"""

from __future__ import annotations

import errno
import os
import pwd
import shlex
import stat
from contextvars import ContextVar
from pathlib import Path
from typing import Final, NamedTuple

from jigcmd.journal.statefiles import StateDirError

__all__ = ["Walked", "trusted_path", "walk"]

# As the kernel's own bound on the links one lookup follows.
_MAX_LINKS: Final = 40
# Set while `_elsewhere`'s example is judged: a refusal of it names no example in turn.
_judging_example: ContextVar[bool] = ContextVar("judging_example", default=False)


class Walked(NamedTuple):
    """A path judged: its deepest existing directory (resolved) and the names to make below it."""

    existing: Path
    missing: tuple[str, ...]
    # `existing`'s (st_dev, st_ino) as judged: what is made is made in that directory only.
    identity: tuple[int, int]


def trusted_path(path: Path, *, create: bool) -> Path:
    """`path` (absolute) resolved, each component checked; missing ones made when `create`.

    Parents are made 0755 and the last component 0700, only once the whole path passed.
    Raises `StateDirError` naming the first component that fails, its owner and mode;
    `FileNotFoundError` for a missing component when not `create`.
    """
    walked = walk(path, to_make=create)
    if not walked.missing:
        return walked.existing
    if not create:
        first = walked.existing / walked.missing[0]
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(first))
    made = _make_below(walked)
    try:
        # Checked again as made: another maker may have been first (as this user or root).
        return trusted_path(made, create=False)
    except FileNotFoundError:
        raise StateDirError(f"state directory {made} was removed as it was made") from None


def walk(path: Path, *, to_make: bool) -> Walked:
    """`path` (absolute) judged, nothing made: what exists checked, and, when `to_make`, that
    its deepest directory may hold new ones. Raises `StateDirError` as `trusted_path` does."""
    pending = list(reversed(path.parts[1:]))
    current = Path("/")
    info = _lstat(current)
    missing: list[str] = []
    links = 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if missing:
            # Below a directory not made yet, nothing exists: no link, so `..` is textual.
            if name == "..":
                missing.pop()
            else:
                missing.append(name)
            continue
        if name == "..":
            current = current.parent
            info = _lstat(current)
            continue
        candidate = current / name
        try:
            found = _lstat(candidate)
        except FileNotFoundError:
            missing.append(name)
            continue
        # The state directory itself is checked as one (`statedir.py`), in its own words.
        last = not pending and not stat.S_ISLNK(found.st_mode)
        _check(current, info, candidate, found, last=last)
        if stat.S_ISLNK(found.st_mode):
            links += 1
            if links > _MAX_LINKS:
                raise StateDirError(f"state directory {path}: too many symbolic links on its path")
            target = Path(os.readlink(candidate))
            pending.extend(reversed(target.parts[1:] if target.is_absolute() else target.parts))
            if target.is_absolute():
                current, info = Path("/"), _lstat(Path("/"))
            continue
        if pending and not stat.S_ISDIR(found.st_mode):
            raise StateDirError(f"{candidate}, on the state directory's path, is not a directory")
        current, info = candidate, found
    # Judged once what is to be made is known: `nonex/..` alone makes nothing.
    if missing and to_make:
        _fit_to_hold(current, info, current / missing[0])
    return Walked(current, tuple(missing), (info.st_dev, info.st_ino))


def _fit_to_hold(parent: Path, parent_info: os.stat_result, name: Path) -> None:
    """Refuse to make `name` in `parent` when others may write it or this user may not."""
    # What is made is this user's: in a sticky directory that is safe (see `_check`).
    if parent_info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not _sticky(parent_info):
        euid = os.geteuid()
        _refuse_writable_parent(parent, parent_info, name, euid, owner=euid)
    if not os.access(parent, os.W_OK | os.X_OK, effective_ids=True):
        # mkdir(2)'s own answer, without making anything: a read-only mount, or no write.
        read_only = os.statvfs(parent).f_flag & os.ST_RDONLY
        _cannot_create(name, errno.EROFS if read_only else errno.EACCES)


def _check(
    parent: Path, parent_info: os.stat_result, name: Path, info: os.stat_result, *, last: bool
) -> None:
    """Refuse `parent` if others may write it and `name` is not ours; `name` if not trusted.

    `last`: `name` is the state directory, whose own owner and mode are checked apart.
    """
    euid = os.geteuid()
    owner = info.st_uid
    # In a sticky directory only an entry's owner (and root) may rename or remove it, so
    # an entry of ours or root's is as safe there as anywhere.
    if parent_info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (
        _sticky(parent_info) and owner in (0, euid)
    ):
        _refuse_writable_parent(parent, parent_info, name, euid, owner)
    if not last and owner not in (0, euid):
        raise StateDirError(
            f"{name}, on the state directory's path, is owned by uid {owner} "
            f"(mode {stat.S_IMODE(info.st_mode):04o}), neither root nor this user (uid {euid}): "
            "its owner could replace what follows it",
            _elsewhere(name, "whose every component is root's or yours"),
        )


def _refuse_writable_parent(
    parent: Path, parent_info: os.stat_result, name: Path, euid: int, owner: int
) -> None:
    """Refuse `parent`, which others may write, holding `name` (not ours when it is sticky)."""
    where = (
        f"{parent}, on the state directory's path, is writable by group or others "
        f"(owner uid {parent_info.st_uid}, mode {stat.S_IMODE(parent_info.st_mode):04o})"
    )
    if _sticky(parent_info):
        # A sticky directory (like /tmp) is meant to be shared: the fault is the entry in
        # it, never the directory's mode, which no one should take from everyone else.
        # Another user's: neither removing nor chowning it is this user's (nor root's) call.
        raise StateDirError(
            f"{where} and {name} in it is uid {owner}'s, neither root's nor this user's "
            f"(uid {euid}): its owner could replace what follows it",
            f"{name} is another user's: leave it to them and " + _elsewhere(name, "of your own"),
        )
    own = _elsewhere(parent, "whose every parent only root or you may write")
    # chmod is offered only to whoever may run it: the directory's owner, or root.
    chmod = f"run chmod go-w {shlex.quote(str(parent))}"
    if euid not in (0, parent_info.st_uid):
        chmod = f"ask its owner (uid {parent_info.st_uid}) to {chmod}"
    raise StateDirError(
        f"{where}: another user could replace what follows it", f"{own}, or {chmod}"
    )


def _cannot_create(path: Path, code: int) -> None:
    """Refuse the state directory: `path`, on its way, cannot be made (mkdir's `code`)."""
    raise StateDirError(
        f"state directory {path} cannot be created: {os.strerror(code)}",
        _elsewhere(path, "you may create"),
    )


def _elsewhere(refused: Path, which: str) -> str:
    """The fix that names another state directory, `which` ("you own"), with one for example.

    Root's example is /var/lib/jigcmd; a user's is the default under their home as the
    password database has it, unless that too lies under the `refused` directory or could
    not be made and trusted (then none is named).
    """
    euid = os.geteuid()
    example: Path | None = Path("/var/lib/jigcmd")
    if euid != 0:
        try:
            home = Path(pwd.getpwuid(euid).pw_dir)
        except KeyError:  # a uid no account has (a container's), so no home to name
            home = Path()
        example = home / ".local" / "state" / "jigcmd" if home.is_absolute() else None
    if example is None or example == refused or refused in example.parents:
        return f"use a state directory {which}: --state-dir DIR (or $JIGCMD_STATE_DIR)"
    # Named only if serve could make it and trust it: a home `useradd -M` never made is not.
    if _judging_example.get() or not _usable(example):
        return f"use a state directory {which}: --state-dir DIR (or $JIGCMD_STATE_DIR)"
    return f"use a state directory {which}, e.g. --state-dir {shlex.quote(str(example))}"


def _usable(example: Path) -> bool:
    """Whether `example` exists and passes the walk, or the walk says it could be made."""
    token = _judging_example.set(True)
    try:
        walk(example, to_make=True)
    except (StateDirError, OSError):
        return False
    finally:
        _judging_example.reset(token)
    return True


def _sticky(info: os.stat_result) -> bool:
    return bool(info.st_mode & stat.S_ISVTX)


def _lstat(path: Path) -> os.stat_result:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StateDirError(f"state directory path {path} cannot be read: {exc.strerror}") from exc


def _make_below(walked: Walked) -> Path:
    """Make `walked.missing` one by one, each in its parent held open and judged by descriptor.

    Made by name from `/` down, a link another user plants (in /tmp) after the walk would
    be followed: so each is made with mkdirat in the directory already judged, opened
    without following a link, and checked before anything is made below it.
    """
    parent = walked.existing
    fd = _open_dir(parent, parent)
    try:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != walked.identity:
            raise StateDirError(
                f"{parent}, on the state directory's path, was replaced while it was checked"
            )
        for index, name in enumerate(walked.missing, start=1):
            last = index == len(walked.missing)
            child = parent / name
            _make(child, 0o700 if last else 0o755, fd)
            child_fd = _open_dir(child, name, fd)
            os.close(fd)
            fd = child_fd
            child_info = os.fstat(fd)
            # As the walk would judge it, had it been there: another maker may have been first.
            _check(parent, info, child, child_info, last=last)
            if not last:
                _fit_to_hold(child, child_info, child / walked.missing[index])
            parent, info = child, child_info
    finally:
        os.close(fd)
    return parent


def _open_dir(path: Path, name: Path | str, dir_fd: int | None = None) -> int:
    """The directory `path` (`name` in `dir_fd`) opened, refused if it is a link or no directory."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise StateDirError(f"state directory path {path} was removed as it was made") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            # Only a link or a file put there since the walk: never followed, never made through.
            raise StateDirError(
                f"{path}, on the state directory's path, became a symbolic link or a "
                "non-directory as it was made (nothing was made through it)",
                f"remove {shlex.quote(str(path))} if it is not yours; "
                + _elsewhere(path, "of your own"),
            ) from None
        raise StateDirError(f"state directory path {path} cannot be read: {exc.strerror}") from exc


def _make(path: Path, mode: int, dir_fd: int) -> None:
    """Make `path`, named in `dir_fd` (`mode`, under the umask); another maker first is fine."""
    try:
        os.mkdir(path.name, mode, dir_fd=dir_fd)
    except FileExistsError:
        pass
    except OSError as exc:
        _cannot_create(path, exc.errno or errno.EIO)
