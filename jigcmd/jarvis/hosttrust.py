"""Whether the directories a jarvis policy takes programs from are only root's and jarvis's.

What an allowed run executes is found on `search_path` (or named by a rule's absolute
`argv0`), and what it loads besides (its shared libraries, its interpreter, its
configuration) comes from `host_dirs`. Whoever else may write one of those directories, or
one above it, can put a file where a rule's program resolves (`/var/tmp/prog`), and jarvis
runs it, as its own user, for every call that rule allows. So, like sudo's `secure_path`
and the state directory's whole-path trust (`jigcmd/durable/statepath.py`), every such
directory must pass, from `/` down (reading only; nothing is made or changed):

- the directory itself is owned by root or jarvis's user and writable by neither group nor
  others, sticky or not: the sticky bit keeps others from renaming entries, not from adding
  new ones;
- each directory above it is owned by root or jarvis's user, and writable by neither group
  nor others unless it is sticky and the next one on the path is root's or jarvis's user's
  (as `/var/tmp/tools`, root's, may be: no one else can rename it away);
- a symbolic link on the way is followed, its target checked the same way; a component that
  does not exist below a trusted directory is fine (only root or jarvis's user could make it).
"""

from __future__ import annotations

import os
import posixpath
import pwd
import stat
from collections.abc import Iterator
from typing import Final

from jigcmd.jarvis.policy import Policy

__all__ = ["untrusted_dir", "untrusted_dirs_message"]

# As the kernel's own bound on the links one lookup follows.
_MAX_LINKS: Final = 40
_OTHERS_WRITE: Final = stat.S_IWGRP | stat.S_IWOTH


def untrusted_dirs_message(policy: Policy, source: str) -> str | None:
    """One line naming the first policy directory others may change, and the fix; else None."""
    euid = os.geteuid()
    for key, directory in _policy_dirs(policy):
        why = untrusted_dir(directory, euid)
        if why is not None:
            return (
                f"{source}: {key}: {directory}: {why}, so another user could put a program "
                f"there that jarvis would run as uid {euid}. List only directories that root "
                f"or uid {euid} owns and no one else may write, nor any directory above them "
                '(as "/usr/bin"): move the programs to one, or, if the directory named is meant '
                "to be root's or yours alone, chown it or chmod go-w it"
            )
    return None


def _policy_dirs(policy: Policy) -> Iterator[tuple[str, str]]:
    """(the key, the directory) of every directory a run's programs and files come from."""
    for directory in policy.search_path:
        yield "search_path", directory
    for directory in policy.host_dirs:
        yield "host_dirs", directory
    for rule in policy.rules:
        if rule.decision == "allow":
            for program in rule.argv0:
                if program.startswith("/"):
                    yield f"rule {rule.name!r}: argv0 {program}", posixpath.dirname(program)


def untrusted_dir(path: str, euid: int) -> str | None:
    """Why others than root and `euid` may change what is in `path` (absolute), or None."""
    pending = list(reversed(path.split("/")))
    current = "/"
    try:
        info = os.lstat(current)
        links = 0
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                current = posixpath.dirname(current)
                info = os.lstat(current)
                continue
            candidate = posixpath.join(current, name)
            try:
                found = os.lstat(candidate)
            except FileNotFoundError:
                return None  # only root or euid, who may write `current`, could make it
            if info.st_mode & _OTHERS_WRITE and not (
                info.st_mode & stat.S_ISVTX and found.st_uid in (0, euid)
            ):
                return f"{current} above it is writable by group or others ({_owned(info)})"
            if stat.S_ISLNK(found.st_mode):
                links += 1
                if links > _MAX_LINKS:
                    return "too many symbolic links on its path"
                target = os.readlink(candidate)
                pending.extend(reversed(target.split("/")))
                if target.startswith("/"):
                    current, info = "/", os.lstat("/")
                continue
            if found.st_uid not in (0, euid):
                return f"{candidate} is owned by neither root nor uid {euid} ({_owned(found)})"
            current, info = candidate, found
    except OSError as exc:
        return f"its path cannot be checked: {exc.strerror or exc}"
    if info.st_mode & _OTHERS_WRITE:
        return f"{current} is writable by group or others ({_owned(info)})"
    return None


def _owned(info: os.stat_result) -> str:
    """`owner uid 1000 (alice), mode 1777`: who may change a directory, as `ls -l` would say."""
    try:
        name = f" ({pwd.getpwuid(info.st_uid).pw_name})"
    except KeyError:
        name = ""
    return f"owner uid {info.st_uid}{name}, mode {stat.S_IMODE(info.st_mode):04o}"
