"""Where jigcmd keeps what must outlive a process: the journal and the envelope slot locks.

Default: `$JIGCMD_STATE_DIR` when set; else `/var/lib/jigcmd` for root; otherwise
`$XDG_STATE_HOME/jigcmd`, or `~/.local/state/jigcmd` when XDG_STATE_HOME is unset or not
absolute (the XDG Base Directory rule). `--state-dir` overrides them all. Every jigcmd
process that uses the same directory shares its operation identities and its envelope slots.

The directory is created 0700. An existing one is refused when it is not a directory, is
owned by another user, or is writable by group or others: whoever can write it can forge
journal rows or hold every slot. Every component of its path is checked too, from `/` down
(`statepath.py`), and so are its sub-directories (ours, written by no one else), the slot
files in `slots` (regular files) and its journal files (ours, written by no one else, no
link); the directory is then opened once and everything in it is
reached through that descriptor (`jigcmd.journal.statefiles`). The path returned is the
resolved one. A verb that only reads what was recorded there
(`existing_state_dir`) creates nothing: a directory that is missing, or holds no journal,
is refused with its path; `jigcmd doctor` asks whether a missing one could be made and
trusted (`unmade_state_dir`), making nothing.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from jigcmd.durable.statepath import trusted_path, walk
from jigcmd.journal.statefiles import SUBDIRECTORIES, StateDirError, anchor, checked

__all__ = [
    "StateDirError",
    "checked_state_dir",
    "default_state_dir",
    "existing_state_dir",
    "prepare_state_dir",
    "slot_file_refusal",
    "unmade_state_dir",
]

_ROOT_DEFAULT = Path("/var/lib/jigcmd")
# The journal's files (`jigcmd.journal.store.DB_NAME` and SQLite's, the marker), which must
# be plain files in the state directory itself.
_JOURNAL_FILES: Final = (
    "journal.sqlite3",
    "journal.sqlite3-wal",
    "journal.sqlite3-shm",
    "journal.mark",
)


def default_state_dir(*, euid: int | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The default state directory for user `euid` (the caller by default) and `environ`."""
    euid = os.geteuid() if euid is None else euid
    environ = os.environ if environ is None else environ
    # For whoever starts jigcmd without a command line of their own to edit (an MCP host's
    # `env` entry, a test), as `JIGCMD_CGROUP_BASE` is for the cgroup base.
    named = environ.get("JIGCMD_STATE_DIR", "")
    if named:
        return Path(named)
    if euid == 0:
        return _ROOT_DEFAULT
    xdg = environ.get("XDG_STATE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "jigcmd"
    # HOME set but empty is not unset: expanduser would make it `/`, a state directory of
    # /.local that no user may create. Only an unset HOME is looked up (its passwd entry).
    home = environ["HOME"] if "HOME" in environ else os.path.expanduser("~")
    if not os.path.isabs(home):
        said = "empty" if not home else f"{home!r}, not an absolute path"
        raise StateDirError(
            f"no state directory: HOME is {said}, and XDG_STATE_HOME is not set to an "
            "absolute path",
            "set HOME to your home directory, or pass --state-dir DIR",
        )
    return Path(home) / ".local" / "state" / "jigcmd"


def prepare_state_dir(path: Path) -> Path:
    """Create `path` (0700, parents as needed) or check an existing one; return it resolved.

    Its path is checked from `/` down first (`jigcmd.durable.statepath`), and what is
    created is created only below components that passed.
    """
    resolved = trusted_path(_absolute(path), create=True)
    return _anchored(resolved)


def checked_state_dir(path: Path, *, slot_files: bool = True) -> Path:
    """`path`, resolved, checked as `prepare_state_dir` checks it; never creates anything.

    `slot_files` False: for a verb that only reads the journal and never opens a slot file,
    which may then list runs beside one serve refuses (`slot_file_refusal` says why).
    """
    path = _absolute(path)
    try:
        resolved = trusted_path(path, create=False)
    except FileNotFoundError:
        raise StateDirError(
            f"state directory {path} does not exist (nothing was created)", "check --state-dir"
        ) from None
    return _anchored(resolved, slot_files=slot_files)


def slot_file_refusal(path: Path) -> StateDirError | None:
    """Why serve and run would refuse the slot files of `path` (checked, resolved), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:  # the default not made yet: no slot file to refuse
        return None
    try:
        _check_slot_files(fd, path / "slots")
    except FileNotFoundError:  # no slots/ yet
        return None
    except StateDirError as exc:
        return exc
    finally:
        os.close(fd)
    return None


def unmade_state_dir(path: Path) -> Path | None:
    """The first directory `prepare_state_dir(path)` would make, None when `path` exists.

    Judged as it judges, making nothing: raises `StateDirError` with its reason when what
    exists of the path is not trusted, or its deepest directory may not hold new ones.
    """
    walked = walk(_absolute(path), to_make=True)
    return walked.existing / walked.missing[0] if walked.missing else None


def existing_state_dir(path: Path, *, holding: str) -> Path:
    """`checked_state_dir(path)`, also refused when it holds no file `holding` (the journal).

    For a verb that reads what was recorded there: a missing directory, or one without the
    journal, is refused naming the path.
    """
    path = checked_state_dir(path)
    if not (path / holding).exists():
        raise StateDirError(
            f"state directory {path} holds no {holding}: nothing was recorded there "
            "(nothing was created)",
            "check --state-dir",
        )
    return path


def _absolute(path: Path) -> Path:
    """`path` made absolute against the working directory, its `..` left as written.

    `..` is resolved by `trusted_path` after the links before it, as the kernel does:
    `/a/ln/../s` with `ln -> /deep/a` is `/deep/s`, not `/a/s` (`os.path.abspath`'s answer).
    """
    return path if path.is_absolute() else Path.cwd() / path


def _anchored(path: Path, *, slot_files: bool = True) -> Path:
    """`path` (resolved, every component checked), its descriptor held and its contents checked."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except NotADirectoryError:
        raise StateDirError(f"state directory {path} is not a directory") from None
    except OSError as exc:
        raise StateDirError(f"state directory {path} cannot be read: {exc.strerror}") from exc
    try:
        checked(f"{path}", os.fstat(fd), kind="state directory")
        check_contents(fd, path, slot_files=slot_files)
    except BaseException:
        os.close(fd)
        raise
    anchor(path, fd)
    return path


def check_contents(fd: int, path: Path, *, slot_files: bool = True) -> None:
    """Refuse sub-directories, slot files and journal files others could write or redirect."""
    _check_subdirectories(fd, path, slot_files=slot_files)
    _check_journal_files(fd, path)


def _check_subdirectories(fd: int, path: Path, *, slot_files: bool) -> None:
    """Refuse a sub-directory that is not ours, others may write, or is no directory.

    A sub-directory another user may write lets that user plant `slots/slot-0 -> /etc/shadow`;
    `runtime` a link would have the zygote mount its tmpfs over the link's target.
    """
    for name in SUBDIRECTORIES:
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        where = f"{path / name}"
        if not stat.S_ISDIR(info.st_mode):
            what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory"
            raise StateDirError(
                f"{where} is {what}", f"remove it (jigcmd makes {name} 0700 itself)"
            )
        checked(where, info)
        if name == "slots" and slot_files:
            _check_slot_files(fd, path / name)


def _check_slot_files(fd: int, slots: Path) -> None:
    """Refuse a slot file that is not a regular file (a FIFO, a link) at start, not at a call."""
    directory = os.open("slots", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    try:
        names = sorted(name for name in os.listdir(directory) if name.startswith("slot-"))
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                info = os.stat(name, dir_fd=directory, follow_symlinks=False)
                if not stat.S_ISREG(info.st_mode):
                    raise StateDirError(
                        f"{slots / name} is not a regular file",
                        "remove it (jigcmd makes slot files itself)",
                    )
    finally:
        os.close(directory)


def _check_journal_files(fd: int, path: Path) -> None:
    """Refuse a journal file that is a link, not ours, or writable by others.

    A link (a journal moved to another disk) makes SQLite keep its WAL beside the link's
    target, where jigcmd does not look, so every call fails; a file another user may write
    (or owns, so may chmod) lets that user rewrite the rows `runs` and `run.get` answer with.
    """
    euid = os.geteuid()
    for name in _JOURNAL_FILES:
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        where = path / name
        if stat.S_ISLNK(info.st_mode):
            raise StateDirError(
                # The link's target is not named: the refusal reaches a caller too, and
                # only the state directory's own path is masked there.
                f"journal file {where} is a symbolic link: SQLite keeps the journal's "
                "-wal and -shm beside the link's target, where jigcmd does not look",
                "move the whole state directory instead and pass --state-dir with its new path",
            )
        # Any other kind of file (a FIFO, a directory) is the journal's to word, where it is
        # opened: `Marker.check_before_open`, `jigcmd.journal.failures`.
        if not stat.S_ISREG(info.st_mode):
            continue
        if info.st_uid != euid:
            raise StateDirError(
                f"journal file {where} is owned by uid {info.st_uid}, not by this user "
                f"(uid {euid}): its owner could rewrite the journal",
                f"run chown {euid} {shlex.quote(str(where))} if it is yours, after checking "
                "what changed it",
            )
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise StateDirError(
                f"journal file {where} is writable by group or others "
                f"(mode {stat.S_IMODE(info.st_mode):04o}): they could rewrite the journal",
                f"run chmod go-w {shlex.quote(str(where))}, after checking what changed it",
            )
