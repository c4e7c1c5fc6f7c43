"""The journal's marker: proof, beside the slots and the registry, that a directory held a journal.

SQLite keeps the newest history in `journal.sqlite3-wal` until a checkpoint copies it into the
database. If that file is lost or its header is corrupt, or the database is truncated, SQLite
opens what is left, or makes a new empty journal, without a word: completed operations would
run again. So the first journal of a state directory writes `journal.mark` (durably), and
every later open checks, before SQLite touches anything:

- the marker exists but the database holds no journal (missing, emptied, no schema): lost;
- the WAL is missing while the marker says a writer may have left history in it (`clean` is
  set only by a close that saw SQLite remove the WAL, i.e. after its final checkpoint): lost;
- the WAL is shorter than its 32-byte header, or the header's magic or checksum is wrong:
  corrupt (SQLite would discard all of it);
- the WAL's frames, checked as SQLite would, end before the last commit the WAL index
  (`-shm`) names: cut or corrupted below what was committed, every commit after the damage
  dropped (`jigcmd.journal.walindex`).

The checks and the open, and a close with its marking, hold an exclusive `flock` on the state
directory itself, so that a last writer closing cleanly and another process opening never
interleave (that would look like a lost WAL).

Any of these refuses to open with `JournalLost`, which says what was lost and how to start a
new journal deliberately. A torn tail of the WAL (a commit that never completed) is normal
after a crash and is not refused: its header is intact, and the WAL index never counted it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import stat
import struct
from collections.abc import Iterator
from pathlib import Path

import msgspec

from jigcmd.journal import walindex
from jigcmd.journal.failures import JournalLost, JournalUnusable
from jigcmd.journal.readonly import connect_read_only
from jigcmd.journal.schema import SCHEMA_VERSION, check_readable
from jigcmd.regularfile import NotRegular, check_regular, read_regular

__all__ = ["MARKER_NAME", "Marker"]

MARKER_NAME = "journal.mark"
# A marker is one short JSON line; more is no marker jigcmd wrote (read as unreadable).
_MARKER_MAX_BYTES = 4096
_WAL_HEADER = struct.Struct(">8I")
_WAL_MAGICS = (0x377F0682, 0x377F0683)


class _Written(msgspec.Struct):
    """What a reader needs of the marker's JSON: whether the last close was clean."""

    clean: bool


class Marker:
    """`journal.mark` of one state directory, and the checks made before SQLite opens."""

    def __init__(self, state_dir: Path, db_name: str) -> None:
        self.path = state_dir / MARKER_NAME
        self.db = state_dir / db_name
        self.wal = state_dir / f"{db_name}-wal"
        self.shm = state_dir / f"{db_name}-shm"
        self._clean: bool | None = None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the state directory's flock (opens and closes of the journal are serialised)."""
        fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def check_before_open(self) -> bool:
        """Refuse a lost or corrupt WAL; True when the marker exists (a journal was here)."""
        self._check_files()
        recorded = self._read()
        if recorded is None:
            return False
        self._clean = recorded
        if _size(self.db) is None:
            self.check_schema(0)
        wal_size = _size(self.wal)
        if wal_size is None:
            if not recorded:
                self._lost(
                    f"its write-ahead log {self.wal.name} is missing, though the last writer "
                    "did not close cleanly: the newest operations it recorded are gone"
                )
        elif wal_size > 0 and not _valid_wal_header(self.wal):
            self._lost(
                f"its write-ahead log {self.wal.name} is corrupt (bad header): SQLite would "
                "drop every operation it holds"
            )
        if wal_size is not None:
            lost = walindex.lost_commits(self.shm, self.wal)
            if lost is not None:
                self._lost(lost)
        return True

    def _check_files(self) -> None:
        """Refuse a journal file that is no regular file: SQLite would block on a FIFO."""
        for path in (self.db, self.wal, self.shm):
            try:
                check_regular(path)
            except NotRegular as exc:
                if stat.S_ISDIR(exc.mode):
                    continue  # SQLite's open fails at once, worded in `journal.failures`
                fix = (
                    f"put the journal back at {path}, or move {path.parent} aside to start afresh"
                    if path == self.db
                    else f"remove {shlex.quote(str(path))} (it holds none of the journal), after "
                    "checking what put it there"
                )
                named = "" if path == self.db else f"{path.name} "
                cause = f"{named}is {exc.what}, not a regular file"
                raise JournalUnusable(self.db, cause, fix) from None

    @contextlib.contextmanager
    def probed(self, *, timeout_s: float) -> Iterator[None]:
        """Make the checks that need SQLite through a read-only connection, before any writer,
        and hold it open while the writer's own checks run.

        A refusal must change nothing on disk: the last read-write connection's close copies
        the WAL into the database and removes it, the very history the refusal says to keep.
        A read-only connection's close never does, and while this one is open (it has read,
        so it holds its shared lock on the database) a refused writer's close is not the last.
        """
        conn = connect_read_only(self.db, timeout_s=timeout_s)
        try:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            self.check_schema(version)
            if version > SCHEMA_VERSION:
                check_readable(version)  # newer than this jigcmd: refused as `migrate` would
            yield
        finally:
            conn.close()

    def check_schema(self, version: int) -> None:
        """Refuse a database without a journal (`user_version` 0) where a marker says one was."""
        if version == 0:
            self._lost(
                f"the database {self.db.name} holds no journal (missing, emptied or truncated)"
            )

    def opened(self) -> None:
        """Record that a writer has the journal open (history may sit in the WAL from now on)."""
        if self._clean is False:
            return
        self._write(clean=False)
        self._clean = False

    def closed(self) -> None:
        """After a close: when SQLite removed the WAL (final checkpoint), mark the journal clean."""
        if _size(self.wal) is None and _size(self.db):
            with contextlib.suppress(OSError):
                self._write(clean=True)

    def _lost(self, what: str) -> None:
        directory = self.path.parent
        raise JournalLost(
            self.db,
            f"{what}. jigcmd will not start a new journal over it, since completed operations "
            "could run again",
            f"to start afresh deliberately, move {directory} aside (keep it to inspect what "
            f"was lost) or delete {self.path}",
        )

    def _read(self) -> bool | None:
        try:
            data, _ = read_regular(self.path, _MARKER_MAX_BYTES)
        except FileNotFoundError:
            return None
        except NotRegular as exc:
            # A FIFO would block every open of the journal: refused as what it is.
            raise JournalUnusable(
                self.db,
                f"its marker {self.path.name} is {exc.what}, not a regular file",
                f"remove {shlex.quote(str(self.path))} (the journal's next writer writes it "
                "again), after checking what put it there",
            ) from None
        try:
            return msgspec.json.decode(data, type=_Written).clean
        except msgspec.DecodeError:
            return False  # an unreadable marker still says a journal was here

    def _write(self, *, clean: bool) -> None:
        temporary = self.path.with_name(f".{MARKER_NAME}.tmp")
        # Never blocks on, or writes through, something planted at the temporary name.
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        fd = os.open(temporary, flags, 0o600)
        try:
            os.write(fd, msgspec.json.encode({"journal": self.db.name, "clean": clean}) + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _valid_wal_header(path: Path) -> bool:
    """Whether the WAL's 32-byte header has SQLite's magic and a matching checksum."""
    with open(path, "rb") as handle:
        header = handle.read(_WAL_HEADER.size)
    if len(header) < _WAL_HEADER.size:
        return False
    words = _WAL_HEADER.unpack(header)
    magic = words[0]
    if magic not in _WAL_MAGICS:
        return False
    # The checksum covers the first 24 bytes, in the byte order the magic's low bit names.
    order = ">" if magic & 1 else "<"
    values = struct.unpack(f"{order}6I", header[:24])
    s0 = s1 = 0
    for index in range(0, 6, 2):
        s0 = (s0 + values[index] + s1) & 0xFFFFFFFF
        s1 = (s1 + values[index + 1] + s0) & 0xFFFFFFFF
    return (s0, s1) == (words[6], words[7])
