"""Why a journal cannot be used, worded in one place: the file, the cause and the fix.

`Journal.open`, `Journal.close` (and recovery's first reads) turn every SQLite or OS failure into a
`JournalUnusable` whose message is one line an operator can act on; `JournalLost` is the
case where the journal's history is known to be incomplete (see `jigcmd.journal.marker`).

Only SQLite's own verdict (a corrupt page, not a database, a table missing) calls a journal
damaged: that fix discards it. A full or read-only filesystem often reaches SQLite as a bare
"disk I/O error" (a `-shm` file it cannot grow), so every other failure is first checked
against the filesystem holding the journal, and worded as what it is.
"""

from __future__ import annotations

import errno
import os
import shlex
import sqlite3
import stat
from enum import Enum, auto
from pathlib import Path

__all__ = [
    "CALLS_REFUSED",
    "LEAST_FREE_BYTES",
    "JournalLost",
    "JournalMoved",
    "JournalUnusable",
    "call_refused",
    "filesystem_full",
    "no_room_to_open",
    "unusable",
    "unwritable",
    "wal_unreadable",
]

# The least free space a call that must be recorded is dispatched with (`unwritable`: serve,
# run, jarvis and `jigcmd doctor` ask it alike), and below which a failed open or read is
# taken as the disk being full. A new journal takes about 100 KiB as it opens (its pages, the
# WAL, SQLite's 32 KiB shared-memory index); each call then a few pages of WAL, and its kept
# streams. Below it a server still starts and answers replays: they write nothing.
LEAST_FREE_BYTES = 256 * 1024
# What SQLite sizes as it opens a journal in WAL mode: its shared-memory index (`-shm`).
_SHM_BYTES = 32 * 1024
# SQLite's primary result codes (the low byte of an extended code) that mean the file itself
# is not a sound database; anything else may be the disk's doing.
_DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
_DENIED_ERRNOS = (errno.EACCES, errno.EPERM)


class JournalUnusable(Exception):
    """Raised when the journal cannot be opened or read; the message names file, cause, fix."""

    def __init__(self, path: Path, cause: str, fix: str) -> None:
        super().__init__(f"journal {path}: {cause}; fix: {fix}")
        self.path = path
        self.cause = cause
        self.fix = fix

    def __reduce__(self) -> tuple[type[JournalUnusable], tuple[Path, str, str]]:
        return type(self), (self.path, self.cause, self.fix)


class JournalLost(JournalUnusable):
    """Raised when a state directory that held a journal no longer has all of it."""


class JournalMoved(FileNotFoundError):
    """The journal file in use is no longer at its path, but still whole at `now_at`."""

    def __init__(self, now_at: Path) -> None:
        super().__init__(
            errno.ENOENT,
            "the journal file was moved while in use: it is no longer at the path this "
            "process opened (nothing recorded was lost)",
        )
        self.now_at = now_at


class WalRemoved(FileNotFoundError):
    """The write-ahead log a writer commits to was removed or replaced under it."""

    def __init__(self, name: str) -> None:
        super().__init__(
            errno.ENOENT,
            f"the journal's write-ahead log {name} was removed or replaced while in use (this "
            "process takes no more writes to the journal)",
        )


class _Kind(Enum):
    """What kept the journal from being used, as far as the error and the filesystem tell."""

    FULL = auto()
    READ_ONLY_MOUNT = auto()
    NOT_WRITABLE = auto()
    GONE = auto()
    DIRECTORY = auto()
    DAMAGED = auto()
    DISK = auto()
    OTHER = auto()


def unusable(path: Path, exc: BaseException) -> JournalUnusable:
    """The one-line refusal for `exc`, raised while opening or reading the journal `path`."""
    cause = _cause(exc)
    if isinstance(exc, JournalMoved):
        return _moved(path, exc.now_at, cause)
    if isinstance(exc, WalRemoved):
        return _wal_removed(path, cause)
    # SQLite words a directory in place of any of its files as something else (a disk I/O
    # error, a read-only database), or blames the journal for its WAL's: each is named.
    directory = _directory_in_place(path)
    if directory is not None:
        return _directory_refusal(path, directory)
    return _refusal(path, _kind(path, exc, cause), cause)


def unwritable(path: Path) -> JournalUnusable | None:
    """Why the journal `path` could not be written, judged without writing; None if it could.

    Serve, run and jarvis refuse each call that must be recorded on it (`call_refused`),
    and `jigcmd doctor`, which must change nothing, says so in the same words: a full or
    read-only filesystem (less than `LEAST_FREE_BYTES` free), or a directory this user may
    not write, or a directory in place of the journal or a file of SQLite's beside it.
    """
    directory = _directory_in_place(path)
    if directory is not None:
        return _directory_refusal(path, directory)
    kind = _filesystem(path.parent)
    if kind is not None:
        least = f"less than {LEAST_FREE_BYTES // 1024} KiB or no inodes free"
        return _refusal(path, kind, least)
    if not os.access(path.parent, os.W_OK):
        return _refusal(path, _Kind.NOT_WRITABLE, f"{path.parent} is not writable by this user")
    return None


# What a state directory below `LEAST_FREE_BYTES` means for its callers (doctor, serve, jarvis).
CALLS_REFUSED = "calls that must be recorded are refused until space is freed; replays are answered"


def call_refused(refusal: JournalUnusable) -> str:
    """The per-call refusal of a call that must be recorded on a journal `unwritable` judged."""
    return (
        f"the journal {refusal.path} could not record the operation before dispatch: "
        f"{refusal.cause}; nothing ran; fix: {refusal.fix}"
    )


def filesystem_full(directory: Path) -> bool:
    """Whether the filesystem holding `directory` has less than `LEAST_FREE_BYTES` (or no
    inode) free, as `unwritable` judges it; False when it cannot be looked at."""
    return _filesystem(directory) is _Kind.FULL


def no_room_to_open(directory: Path) -> bool:
    """Whether the filesystem holding `directory` lacks room for the `-shm` index SQLite
    sizes as it opens a journal, or an inode: serve and run then cannot start there."""
    free = _free(directory)
    return free is not None and (free[0] < _SHM_BYTES or free[1])


def _refusal(path: Path, kind: _Kind, cause: str) -> JournalUnusable:
    """The refusal for a journal kept from use by `kind`; `cause` is what was observed."""
    directory = path.parent
    match kind:
        case _Kind.FULL:
            cause = f"the filesystem holding {directory} is full ({cause})"
            fix = "free space on it, then try again; nothing recorded was lost, so keep the journal"
        case _Kind.READ_ONLY_MOUNT:
            cause = f"the filesystem holding {directory} is mounted read-only"
            fix = (
                "remount it read-write, or pass another --state-dir; "
                "`jigcmd runs` and `jigcmd attest` read it as it is"
            )
        case _Kind.NOT_WRITABLE:
            fix = f"make {directory} writable by this user, or pass another --state-dir"
        case _Kind.GONE:
            fix = (
                f"leave {directory} in place while jigcmd uses it (what this process recorded "
                "went with it); the next start makes a new journal there"
            )
        case _Kind.DIRECTORY:
            return _directory_refusal(path, path)
        case _Kind.DAMAGED:
            fix = (
                f"the journal is damaged: move {directory} aside (keep it to inspect or restore "
                "from a backup) and start with a fresh --state-dir"
            )
        case _Kind.DISK:
            fix = (
                f"check the disk holding {directory} (the kernel log, `dmesg`, says what failed), "
                "then start again; this alone does not show the journal damaged, so keep it"
            )
        case _Kind.OTHER:
            fix = f"check {directory} (permissions, disk, mounts), or pass another --state-dir"
    return JournalUnusable(path, cause, fix)


# What each of SQLite's files beside the journal is, by its suffix.
_COMPANIONS = {"-wal": "write-ahead log", "-shm": "shared-memory index"}


def _directory_in_place(path: Path) -> Path | None:
    """The first of the journal `path`, its WAL and its `-shm` that is a directory; else None."""
    for each in (path, *(path.with_name(path.name + suffix) for suffix in _COMPANIONS)):
        try:
            if stat.S_ISDIR(os.lstat(each).st_mode):
                return each
        except OSError:
            continue
    return None


def _directory_refusal(path: Path, directory: Path) -> JournalUnusable:
    """The refusal for a directory at `directory`: the journal `path` itself, or a file of
    SQLite's beside it (then the journal is kept)."""
    if directory == path:
        return JournalUnusable(
            path,
            "a directory is where the journal file should be",
            f"move {path} out of the way (it is not a jigcmd journal)",
        )
    what = _COMPANIONS[directory.name.removeprefix(path.name)]
    return JournalUnusable(
        path,
        f"a directory is where its {what} {directory.name} should be",
        f"move {shlex.quote(str(directory))} out of the way, after checking what put it "
        f"there (it is not SQLite's); keep {path}, the journal itself",
    )


def _moved(path: Path, now_at: Path, cause: str) -> JournalUnusable:
    """The refusal for a journal moved while in use: whole at `now_at`, lost to this process."""
    fix = (
        f"move {now_at.parent} back to {path.parent} and start again, or start with "
        f"--state-dir {shlex.quote(str(now_at.parent))}; leave a state directory in place "
        "while jigcmd uses it"
    )
    return JournalUnusable(path, cause, fix)


def _wal_removed(path: Path, cause: str) -> JournalUnusable:
    """The refusal for a WAL removed under this process (`journal.walfile`)."""
    fix = (
        f"leave the files of {path.parent} in place while jigcmd uses them, then start again: "
        "this process's close keeps every commit made before the removal (a commit the log "
        "vanished under is never kept, and the next start then refuses the journal, saying so)"
    )
    return JournalUnusable(path, cause, fix)


def wal_unreadable(path: Path) -> JournalUnusable:
    """The refusal to read a WAL holding commits that a read-only mount keeps from SQLite."""
    directory = path.parent
    return JournalUnusable(
        path,
        f"its write-ahead log {path.name}-wal holds commits SQLite reads only with "
        f"{path.name}-shm beside it, which is missing on the read-only filesystem holding "
        f"{directory}",
        f"copy {directory} to a writable place (`cp -a`) and read the copy (--state-dir); "
        "nothing recorded was lost",
    )


def _kind(path: Path, exc: BaseException, cause: str) -> _Kind:
    text = cause.lower()
    code = exc.errno if isinstance(exc, OSError) else None
    primary = _sqlite_code(exc)
    if code == errno.ENOSPC or primary == sqlite3.SQLITE_FULL or "full" in text:
        return _Kind.FULL
    if code == errno.ENOENT:
        return _Kind.GONE
    if code == errno.EISDIR or (path.is_dir() and "unable to open" in text):
        return _Kind.DIRECTORY
    if primary in _DAMAGE_CODES or (type(exc) is sqlite3.DatabaseError and primary is None):
        # SQLite's verdict on the file's contents, or one of our own checks of its schema.
        return _Kind.DAMAGED
    if code == errno.EROFS:
        return _Kind.READ_ONLY_MOUNT
    if code in _DENIED_ERRNOS:
        return _Kind.NOT_WRITABLE
    filesystem = _filesystem(path.parent)
    if filesystem is not None:
        return filesystem
    if primary == sqlite3.SQLITE_READONLY:
        return _Kind.NOT_WRITABLE
    if code == errno.EIO or primary == sqlite3.SQLITE_IOERR:
        return _Kind.DISK
    return _Kind.OTHER


def _filesystem(directory: Path) -> _Kind | None:
    """FULL or READ_ONLY_MOUNT when the filesystem holding `directory` is so; else None."""
    try:
        info = os.statvfs(directory)
    except OSError:
        return None
    if info.f_flag & os.ST_RDONLY:
        return _Kind.READ_ONLY_MOUNT
    free, no_inodes = _room(info)
    if free < LEAST_FREE_BYTES or no_inodes:
        return _Kind.FULL
    return None


def _free(directory: Path) -> tuple[int, bool] | None:
    """The bytes free to this user on the filesystem holding `directory`, and whether no
    inode is; None when it cannot be looked at."""
    try:
        return _room(os.statvfs(directory))
    except OSError:
        return None


def _room(info: os.statvfs_result) -> tuple[int, bool]:
    # Root may use the blocks reserved for it; others only what is available to them.
    blocks = info.f_bfree if os.geteuid() == 0 else info.f_bavail
    return blocks * info.f_frsize, info.f_files > 0 and info.f_favail == 0


def _sqlite_code(exc: BaseException) -> int | None:
    """SQLite's primary result code for `exc`, or None when SQLite did not raise it."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _cause(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return (str(exc) or type(exc).__name__).replace("\n", " ")
