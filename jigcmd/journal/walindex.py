"""The WAL index's last commit against the WAL's frames: a WAL cut below what was committed.

SQLite keeps in `journal.sqlite3-shm` the header of its WAL index: `mxFrame`, the number of
the WAL's last committed frame, the salts of the WAL's current generation and how many frames
a checkpoint has copied into the database (sqlite.org/walformat.html). The first connection
to open the journal rebuilds that index from the WAL alone, stopping at the first frame whose
salts or checksum are wrong, or at the end of the file, and drops every commit after it
without a word. So before SQLite opens the journal, the WAL's frames are checked as SQLite
would check them, up to the header's `mxFrame`: a WAL that ends sooner lost commits.

This runs only when no other process has the journal open (none holds the -shm's "DMS"
lock): a live writer's index is its own, and SQLite would not rebuild it. So it runs only
after a process died leaving commits in the WAL, and then costs 0.1 to 0.3 ms per frame
(docs/performance.md). The -shm outlives any death of a process, since it is a file, but it
is never synced: after a power cut or a reboot it may be stale or gone, and then nothing is
compared (docs/protocols.md, "Faults"); a header with no readable copy is compared with
nothing too, but said on stderr. Nothing here writes, and no descriptor SQLite holds
is closed (closing any descriptor of the -shm would drop the POSIX locks of this process's
connections on it).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import struct
from pathlib import Path
from typing import BinaryIO, NamedTuple

__all__ = ["lost_commits"]

logger = logging.getLogger(__name__)

# One copy of the header (`WalIndexHdr`), in the host's byte order; two copies lead the file,
# then the checkpoint information, whose first word is `nBackfill`.
_HEADER = struct.Struct("=IIIBBHII2I2I2I")
_COPY = _HEADER.size
_SALTS = 32  # offset of `aSalt` in the header
_BACKFILL = struct.Struct("=I")
_READ = 2 * _COPY + _BACKFILL.size
_VERSION = 3007000
# The byte every connection holds a shared lock on while it has the index mapped.
_DMS_BYTE = 128
# `struct flock` on 64-bit Linux: type, whence, start, len, pid.
_FLOCK = struct.Struct("=hhxxxxqqi4x")
_WAL_HEADER = struct.Struct(">8I")
_FRAME_HEADER = struct.Struct(">6I")


class _Committed(NamedTuple):
    """What one WAL index header says: committed frames, those in the database, generation."""

    frames: int
    backfilled: int
    salts: bytes  # as the WAL holds them (SQLite copies them byte for byte)


def lost_commits(shm: Path, wal: Path) -> str | None:
    """What the WAL `wal` lost below the last commit the index `shm` names; None if nothing."""
    if _open_here(shm):
        return None  # this process has the journal open: its index is live
    try:
        fd = os.open(shm, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _locked_elsewhere(fd):
            return None
        before = _read(fd)
        if before is None:
            _not_checked(shm, wal)
            return None
        if before.backfilled >= before.frames:
            return None
        valid = _valid_frames(wal, before)
    finally:
        # No connection of this process has the -shm open: `_open_here` said so.
        os.close(fd)
    if valid is None or valid >= before.frames:
        return None
    return (
        f"its write-ahead log {wal.name} ends at frame {valid}, though {before.frames} frames "
        "were committed to it: SQLite would drop every operation committed after the cut or "
        "the corrupt frame"
    )


def _not_checked(shm: Path, wal: Path) -> None:
    """Say that a WAL holding frames was not checked: its index has no readable header.

    Not refused: SQLite's own start leaves a -shm so while it rebuilds the index, and a start
    killed then leaves it for the next (docs/performance.md, "A -shm without a header").
    """
    with contextlib.suppress(OSError):
        if os.stat(wal).st_size <= _WAL_HEADER.size:
            return  # no frame: nothing to lose
    logger.warning(
        "the journal's WAL index %s has no readable header (a start killed while SQLite "
        "rebuilt it, a power cut, or damage): whether %s lost commits was not checked; "
        "SQLite rebuilds the index from the WAL as it stands",
        shm.name,
        wal.name,
    )


def _locked_elsewhere(fd: int) -> bool:
    """Whether another process's connection has the index open (or that cannot be told)."""
    query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, _DMS_BYTE, 1, 0)
    try:
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
    except OSError:
        return True
    (kind, *_) = _FLOCK.unpack(answer)
    return bool(kind != fcntl.F_UNLCK)


def _open_here(path: Path) -> bool:
    """Whether a descriptor of this process is open on the file at `path` (F_GETLK never
    reports this process's own locks)."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    with contextlib.suppress(OSError), os.scandir("/proc/self/fd") as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                found = os.stat(entry.path)
                if (found.st_dev, found.st_ino) == (info.st_dev, info.st_ino):
                    return True
    return False


def _read(fd: int) -> _Committed | None:
    """The last commit the index header names; None when neither copy of it is readable."""
    data = os.pread(fd, _READ, 0)
    if len(data) < _READ:
        return None  # SQLite truncates the -shm as it starts to rebuild it
    (backfilled,) = _BACKFILL.unpack_from(data, 2 * _COPY)
    # SQLite writes the second copy, then the first: after a death between the two the
    # second is the newer, and one damaged copy leaves the other to compare with.
    for copy in (data[_COPY : 2 * _COPY], data[:_COPY]):
        words = _HEADER.unpack(copy)
        version, _, _, is_init, _, _, frames, _, _, _, _, _, sum1, sum2 = words
        if version == _VERSION and is_init and _checksum("=", copy[: _COPY - 8]) == (sum1, sum2):
            return _Committed(frames, backfilled, copy[_SALTS : _SALTS + 8])
    return None


def _valid_frames(wal: Path, index: _Committed) -> int | None:
    """The last commit frame SQLite would find in `wal`, looking no further than `index`'s.

    None when the WAL is of another generation than the index (nothing to compare).
    """
    try:
        with open(wal, "rb") as handle:
            header = handle.read(_WAL_HEADER.size)
            if len(header) < _WAL_HEADER.size:
                return 0  # the header itself is gone
            magic, _, page_size, _, _, _, sum1, sum2 = _WAL_HEADER.unpack(header)
            if header[16:24] != index.salts:
                return None
            # Frame checksums go on from the header's, in the order the magic's low bit names.
            order = ">" if magic & 1 else "<"
            return _last_commit(handle, order, page_size, index, (sum1, sum2))
    except FileNotFoundError:
        return 0


def _last_commit(
    handle: BinaryIO, order: str, page_size: int, index: _Committed, sums: tuple[int, int]
) -> int:
    last = 0
    for frame in range(1, index.frames + 1):
        head = handle.read(_FRAME_HEADER.size)
        page = handle.read(page_size)
        if len(head) < _FRAME_HEADER.size or len(page) < page_size:
            break
        number, commit, _, _, sum1, sum2 = _FRAME_HEADER.unpack(head)
        if number == 0 or head[8:16] != index.salts:
            break
        sums = _checksum(order, head[:8] + page, sums)
        if sums != (sum1, sum2):
            break
        if commit:
            last = frame
    return last


def _checksum(order: str, data: bytes, sums: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    """SQLite's running checksum over pairs of 32-bit words of `data`, from `sums`."""
    values = struct.unpack(f"{order}{len(data) // 4}I", data)
    s0, s1 = sums
    for first, second in zip(values[::2], values[1::2], strict=True):
        s0 = (s0 + first + s1) & 0xFFFFFFFF
        s1 = (s1 + second + s0) & 0xFFFFFFFF
    return s0, s1
