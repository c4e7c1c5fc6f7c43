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
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Final

from jigcmd.journal.statefiles import StateDirError

__all__ = ["trusted_path"]

# As the kernel's own bound on the links one lookup follows.
_MAX_LINKS: Final = 40


def trusted_path(path: Path, *, create: bool) -> Path:
    """`path` (absolute) resolved, each component checked; missing ones made when `create`.

    Parents are made 0755 and the last component 0700, each only below components that
    passed. Raises `StateDirError` naming the first component that fails, its owner and
    mode; `FileNotFoundError` for a missing component when not `create`.
    """
    pending = list(reversed(path.parts[1:]))
    current = Path("/")
    info = _lstat(current)
    links = 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            current = current.parent
            info = _lstat(current)
            continue
        candidate = current / name
        try:
            found = _lstat(candidate)
        except FileNotFoundError:
            if not create:
                raise
            found = _make(candidate, 0o755 if pending else 0o700)
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
    return current


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
        _refuse_writable_parent(parent, parent_info, name, owner, euid)
    if not last and owner not in (0, euid):
        raise StateDirError(
            f"{name}, on the state directory's path, is owned by uid {owner} "
            f"(mode {stat.S_IMODE(info.st_mode):04o}), neither root nor this user (uid {euid}): "
            "its owner could replace what follows it",
            "use a state directory whose every component is root's or yours "
            "(e.g. /var/lib/jigcmd for root)",
        )


def _refuse_writable_parent(
    parent: Path, parent_info: os.stat_result, name: Path, owner: int, euid: int
) -> None:
    """Refuse `parent`, which others may write, holding `name` (not ours when it is sticky)."""
    where = (
        f"{parent}, on the state directory's path, is writable by group or others "
        f"(owner uid {parent_info.st_uid}, mode {stat.S_IMODE(parent_info.st_mode):04o})"
    )
    if _sticky(parent_info):
        # A sticky directory (like /tmp) is meant to be shared: the fault is the entry in
        # it, never the directory's mode, which no one should take from everyone else.
        raise StateDirError(
            f"{where} and {name} in it is owned by uid {owner}, neither root nor this user "
            f"(uid {euid}): "
            "its owner could replace what follows it",
            f"remove or chown {name}, or use another directory (e.g. /var/lib/jigcmd for root)",
        )
    raise StateDirError(
        f"{where}: another user could replace what follows it",
        "use a state directory whose every parent only root or you may write "
        f"(e.g. /var/lib/jigcmd for root), or run chmod go-w {parent}",
    )


def _sticky(info: os.stat_result) -> bool:
    return bool(info.st_mode & stat.S_ISVTX)


def _lstat(path: Path) -> os.stat_result:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StateDirError(f"state directory path {path} cannot be read: {exc.strerror}") from exc


def _make(path: Path, mode: int) -> os.stat_result:
    """Make the directory `path` (`mode`, under the umask); another maker first is fine."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    except OSError as exc:
        raise StateDirError(f"state directory {path} cannot be created: {exc.strerror}") from exc
    return _lstat(path)
