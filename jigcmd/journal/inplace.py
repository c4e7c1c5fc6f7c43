"""Whether the journal file a process opened is still the one at its path.

SQLite goes on writing to an unlinked file without a word: a journal whose state directory
was removed (or replaced) would record operations nobody can ever read.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from jigcmd.journal.failures import JournalMoved

__all__ = ["file_id", "gone"]


def file_id(path: Path) -> tuple[int, int]:
    """The device and inode of the file at `path`."""
    info = os.stat(path)
    return info.st_dev, info.st_ino


def gone(path: Path, opened: tuple[int, int]) -> OSError | None:
    """Why `path` is no longer the journal file opened as `opened`, or None while it is."""
    try:
        if file_id(path) == opened:
            return None
    except FileNotFoundError:
        pass
    moved_to = _now_at(opened)
    if moved_to is not None:
        return JournalMoved(moved_to)
    return FileNotFoundError(
        errno.ENOENT,
        f"the journal file was removed while in use (its state directory {path.parent} "
        "was deleted or replaced)",
    )


def _now_at(file_id: tuple[int, int]) -> Path | None:
    """Where the journal file opened as `file_id` is now, if it still has a name (moved, not
    deleted): found through this process's own descriptors, none of them opened or closed
    (closing one would drop SQLite's locks)."""
    descriptors = Path("/proc/self/fd")
    with contextlib.suppress(OSError):
        for fd in descriptors.iterdir():
            with contextlib.suppress(OSError):
                info = os.stat(fd)
                if (info.st_dev, info.st_ino) == file_id and info.st_nlink > 0:
                    return Path(os.readlink(fd))
    return None
