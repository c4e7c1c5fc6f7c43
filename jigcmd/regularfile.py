"""A file the state directory keeps, read without hanging: a regular file, or refused as what it is.

A FIFO where a key, the journal's marker or the journal belongs blocks a plain `open` until
a writer comes (forever); a device such as `/dev/zero` never ends. So these files are
opened `O_NONBLOCK` (an open of a FIFO returns at once), `O_NOFOLLOW` unless the caller
follows links, `fstat`ed, and refused as what they are before a byte is read.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = ["NotRegular", "check_regular", "read_regular"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISLNK, "a symbolic link"),
)


class NotRegular(Exception):
    """Raised when a path names something other than a regular file; `what` says what."""

    def __init__(self, path: Path, what: str, mode: int = stat.S_IFLNK) -> None:
        super().__init__(f"{path} is {what}, not a regular file")
        self.path = path
        self.what = what
        self.mode = mode


def _kind(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a file")


def check_regular(path: Path) -> None:
    """Refuse `path` (links followed) unless it is a regular file; a missing one passes.

    For a file another library opens (SQLite): only its type is checked, nothing is opened.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(info.st_mode):
        raise NotRegular(path, _kind(info.st_mode), info.st_mode)


def read_regular(path: Path, limit: int, *, follow: bool = False) -> tuple[bytes, os.stat_result]:
    """At most `limit + 1` bytes of the regular file `path`, and its `fstat`.

    Raises `NotRegular` for anything else (a symbolic link too, unless `follow`), and
    `OSError` as `open` does (`FileNotFoundError` for a missing file).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError:
        with contextlib.suppress(OSError):
            if not follow and os.path.islink(path):
                raise NotRegular(path, "a symbolic link") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(path, _kind(info.st_mode), info.st_mode)
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks), info
    finally:
        os.close(fd)
