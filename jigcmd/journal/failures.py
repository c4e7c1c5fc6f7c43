"""Why a journal cannot be used, worded in one place: the file, the cause and the fix.

`Journal.open`, `Journal.close` (and recovery's first reads) turn every SQLite or OS failure into a
`JournalUnusable` whose message is one line an operator can act on; `JournalLost` is the
case where the journal's history is known to be incomplete (see `jigcmd.journal.marker`).
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

__all__ = ["JournalLost", "JournalUnusable", "unusable"]


class JournalUnusable(Exception):
    """Raised when the journal cannot be opened or read; the message names file, cause, fix."""


class JournalLost(JournalUnusable):
    """Raised when a state directory that held a journal no longer has all of it."""


def unusable(path: Path, exc: BaseException) -> JournalUnusable:
    """The one-line refusal for `exc`, raised while opening or reading the journal `path`."""
    directory = path.parent
    cause = _cause(exc)
    text = cause.lower()
    code = exc.errno if isinstance(exc, OSError) else None
    if code == errno.ENOSPC or "full" in text:
        fix = f"free space on the filesystem that holds {directory}, then start again"
    elif code in (errno.EROFS, errno.EACCES, errno.EPERM) or "readonly" in text.replace(
        "-", ""
    ).replace(" ", ""):
        fix = f"make {directory} writable by this user, or pass another --state-dir"
    elif code == errno.ENOENT:
        fix = (
            f"leave {directory} in place while jigcmd uses it (what this process recorded "
            "went with it); the next start makes a new journal there"
        )
    elif code == errno.EISDIR or (path.is_dir() and "unable to open" in text):
        cause = "a directory is where the journal file should be"
        fix = f"move {path} out of the way (it is not a jigcmd journal)"
    elif isinstance(exc, sqlite3.DatabaseError):
        fix = (
            f"the journal is damaged: move {directory} aside (keep it to inspect or restore "
            "from a backup) and start with a fresh --state-dir"
        )
    else:
        fix = f"check {directory} (permissions, disk, mounts), or pass another --state-dir"
    return JournalUnusable(f"journal {path}: {cause}; fix: {fix}")


def _cause(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return (str(exc) or type(exc).__name__).replace("\n", " ")
