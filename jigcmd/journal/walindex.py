"""The WAL index's header: how far the WAL's commits reached, known apart from the WAL itself.

SQLite keeps in `journal.sqlite3-shm` the header of its WAL index: `mxFrame`, the number of
the WAL's last committed frame, the salts of the WAL's current generation and how many frames
a checkpoint has copied into the database (sqlite.org/walformat.html, "The WAL-Index
Format"). The first connection to open the journal rebuilds that index from the WAL alone,
stopping at the first frame whose checksum fails, or at the end of the file, and drops every
commit after it without a word. So the header is read before SQLite opens the journal and
again once a connection has read it: fewer committed frames in the same generation is a WAL
cut or corrupted below what was committed (`lost_commits`).

The -shm outlives any death of a process (a SIGKILL, an OOM kill), since it is a file, but it
is never synced: after a power cut or a reboot it may be stale or gone, and then nothing is
compared (docs/protocols.md, "Faults"). Nothing here writes, and no descriptor SQLite may
hold is closed: closing any descriptor of the -shm would drop the POSIX locks this process's
connections hold on it.
"""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path
from typing import NamedTuple

__all__ = ["Committed", "committed", "lost_commits", "lost_in_empty", "read_held"]

# One copy of the header (`WalIndexHdr`), in the host's byte order; two copies lead the file,
# then the checkpoint information, whose first word is `nBackfill`.
_HEADER = struct.Struct("=IIIBBHII2I2I2I")
_COPY = _HEADER.size
_BACKFILL = struct.Struct("=I")
_READ = 2 * _COPY + _BACKFILL.size
_VERSION = 3007000


class Committed(NamedTuple):
    """What one WAL index header says: committed frames, those in the database, generation."""

    frames: int
    backfilled: int
    salts: tuple[int, int]


def committed(shm: Path) -> Committed | None:
    """The header of the -shm at `shm`, read before SQLite opens; None when none is valid."""
    held = _held_fd(shm)
    if held is not None:
        return _parse(os.pread(held, _READ, 0))
    try:
        fd = os.open(shm, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return _parse(os.pread(fd, _READ, 0))
    finally:
        # No connection of this process has the -shm open (it would hold a descriptor).
        os.close(fd)


def read_held(shm: Path) -> Committed | None:
    """The header as a connection of this process has it (rebuilt if it was the first)."""
    held = _held_fd(shm)
    return None if held is None else _parse(os.pread(held, _READ, 0))


def lost_commits(wal: str, before: Committed | None, after: Committed | None) -> str | None:
    """What the WAL `wal` lost since `before` was written, judged from `after`; None if nothing."""
    if before is None or after is None or before.salts != after.salts:
        return None  # nothing to compare, or another generation of the WAL
    if after.frames >= before.frames or before.backfilled >= before.frames:
        return None
    return (
        f"its write-ahead log {wal} ends at frame {after.frames}, though {before.frames} "
        "frames were committed to it: SQLite would drop every operation committed after the cut "
        "or the corrupt frame"
    )


def lost_in_empty(wal: str, before: Committed | None) -> str | None:
    """What the empty WAL `wal` lost, when `before` says it held commits not in the database."""
    if before is None or before.backfilled >= before.frames:
        return None
    return (
        f"its write-ahead log {wal} is empty, though {before.frames} frames were committed "
        "to it and not yet copied into the database: every operation they held is gone"
    )


def _parse(data: bytes) -> Committed | None:
    if len(data) < _READ or data[:_COPY] != data[_COPY : 2 * _COPY]:
        return None  # no header, or one being written
    words = _HEADER.unpack(data[:_COPY])
    version, _, _, is_init, _, _, frames, _, _, _, salt1, salt2, sum1, sum2 = words
    if version != _VERSION or not is_init or _checksum(data[: _COPY - 8]) != (sum1, sum2):
        return None
    (backfilled,) = _BACKFILL.unpack_from(data, 2 * _COPY)
    return Committed(frames, backfilled, (salt1, salt2))


def _checksum(data: bytes) -> tuple[int, int]:
    """SQLite's checksum of the header, over pairs of words in the host's byte order."""
    values = struct.unpack(f"={len(data) // 4}I", data)
    s0 = s1 = 0
    for index in range(0, len(values), 2):
        s0 = (s0 + values[index] + s1) & 0xFFFFFFFF
        s1 = (s1 + values[index + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def _held_fd(shm: Path) -> int | None:
    """A descriptor of this process open on the file at `shm` (SQLite's), found by its inode."""
    try:
        info = os.stat(shm)
    except OSError:
        return None
    wanted = (info.st_dev, info.st_ino)
    with contextlib.suppress(OSError), os.scandir("/proc/self/fd") as entries:
        for entry in entries:
            with contextlib.suppress(OSError, ValueError):
                found = os.stat(entry.path)
                if (found.st_dev, found.st_ino) == wanted:
                    return int(entry.name)
    return None
