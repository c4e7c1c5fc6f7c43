"""Which files git tracks: the repository's index (`.git/index`), read by our own parser.

Git never ignores a file it tracks, whatever `.gitignore` says, so a project's committed
`bunfig.toml` is part of it even when `.gitignore` lists the name. The index is read here,
not asked of the `git` program: a candidate repository's own config can make git run
commands (`core.fsmonitor`, hooks), and reading a directory must run nothing. Versions 2, 3
and 4 are read (SHA-1 and SHA-256 repositories); `.git` may be a file naming the git
directory (`gitdir: …`, as worktrees and submodules have); a `.git` that names no usable
git directory (no `gitdir:` line, a NUL byte, a symlink) still marks the work tree's root,
as it does for git, with no tracked files and a note. Every open is `O_NOFOLLOW |
O_NONBLOCK`, checked with `fstat` and bounded, and so are the paths an index names (version
4 builds each from the one before). An index that cannot be read (too large,
corrupt, an unknown version, a split index) counts as no tracked files, and says why in a
note; a repository without an index (nothing added yet) tracks nothing, silently.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MAX_INDEX_BYTES",
    "IndexFormatError",
    "Repository",
    "Tracked",
    "find_repository",
    "parse_index",
]

# An index larger than this is not read (about 600,000 entries; --files reads 20,000).
MAX_INDEX_BYTES = 64 << 20
# Version 4 compresses each path against the one before, so a small index could name paths
# of any length: no path is longer than Linux's PATH_MAX, nor all of them together than this.
_MAX_PATH_BYTES = 4096
_MAX_PATHS_BYTES = 2 * MAX_INDEX_BYTES
# `.git` files, `commondir` and `config` are a few lines; more is not a git directory.
_MAX_SMALL_BYTES = 1 << 20
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_HEADER = struct.Struct(">4sII")
# ctime, mtime (seconds and nanoseconds each), dev, ino, mode, uid, gid, size.
_STAT_BYTES = 40
_EXTENDED = 0x4000
_NAME_MASK = 0x0FFF
# The kinds of entry that are files in the work tree: a regular file or a symlink (not a
# submodule's gitlink, nor a sparse index's directory).
_FILE_KINDS = (0o100000, 0o120000)
_SPLIT = "it is a split index, core.splitIndex"
_SHA256 = re.compile(rb"^\s*objectformat\s*=\s*sha256\s*$", re.IGNORECASE | re.MULTILINE)


class IndexFormatError(ValueError):
    """Raised when an index's bytes are not an index this parser reads; says why."""


@dataclass(frozen=True)
class Tracked:
    """The files git tracks (relative to the work tree's root), and why none are known."""

    paths: frozenset[str] = frozenset()
    note: str | None = None


@dataclass(frozen=True)
class Repository:
    """A git work tree: its root, its git directory and the directory they share (None,
    with why in `problem`, when its `.git` names no usable git directory)."""

    top: Path
    git_dir: Path | None
    common_dir: Path | None
    problem: str = ""

    def tracked(self) -> Tracked:
        """The files its index names; none, with a note, when the index cannot be read."""
        if self.git_dir is None or self.common_dir is None:
            return Tracked(note=_unusable(self.top / ".git", self.problem))
        index = self.git_dir / "index"
        try:
            data = _read_bounded(index, MAX_INDEX_BYTES)
        except OSError as exc:
            return Tracked(note=_unread(index, exc.strerror or str(exc)))
        if data is None:
            return Tracked()
        try:
            return Tracked(frozenset(parse_index(data, self._hash_bytes(self.common_dir))))
        except IndexFormatError as exc:
            return Tracked(note=_unread(index, str(exc)))

    @staticmethod
    def _hash_bytes(common_dir: Path) -> int:
        """20 for a SHA-1 repository, 32 for one whose config says `objectFormat = sha256`."""
        try:
            config = _read_bounded(common_dir / "config", _MAX_SMALL_BYTES) or b""
        except OSError:
            config = b""
        return 32 if _SHA256.search(config) else 20


def _unread(index: Path, why: str) -> str:
    return (
        f"git's index {index} was not read ({why}), so no file counts as tracked: "
        ".gitignore applies to every file"
    )


def _unusable(dot_git: Path, why: str) -> str:
    return (
        f"{dot_git} names no usable git directory ({why}), so no file counts as tracked: "
        ".gitignore applies to every file"
    )


def find_repository(root: Path) -> Repository | None:
    """The git work tree `root` lies in (its own, or one above), or None."""
    resolved = root.resolve()
    for directory in (resolved, *resolved.parents):
        dot_git = directory / ".git"
        # Whatever `.git` is marks the root, as for git: the `.gitignore` files up to it
        # apply even when it names no git directory this parser can read.
        if not dot_git.exists():
            continue
        if dot_git.is_dir():
            return _repository(directory, dot_git)
        try:
            return _repository(directory, _pointed_to(dot_git))
        except _Unusable as exc:
            return Repository(directory, None, None, str(exc))
    return None


class _Unusable(Exception):
    """Raised when a `.git` file or a `commondir` names no git directory; says why."""


def _repository(top: Path, git_dir: Path) -> Repository:
    """A worktree's git directory names the repository's own in `commondir`."""
    try:
        common = (_read_bounded(git_dir / "commondir", _MAX_SMALL_BYTES) or b"").strip()
    except OSError:
        common = b""
    if b"\0" in common:
        raise _Unusable(f"{git_dir / 'commondir'} holds a NUL byte")
    common_dir = git_dir / os.fsdecode(common) if common else git_dir
    return Repository(top, git_dir, common_dir)


def _pointed_to(dot_git: Path) -> Path:
    """The directory a `.git` file names (`gitdir: PATH`, relative to the file's own)."""
    try:
        text = _read_bounded(dot_git, _MAX_SMALL_BYTES)
    except OSError as exc:
        raise _Unusable(exc.strerror or str(exc)) from exc
    if text is None:
        raise _Unusable("it is a symlink or not a regular file")
    first = text.split(b"\n", 1)[0].strip()
    if not first.startswith(b"gitdir:"):
        raise _Unusable("no gitdir: line")
    if b"\0" in first:
        raise _Unusable("its gitdir: line holds a NUL byte")
    return dot_git.parent / os.fsdecode(first.removeprefix(b"gitdir:").strip())


def _read_bounded(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes; None when absent, a link or not a regular file; `OSError`
    (EFBIG) past `limit`, never read into memory whole."""
    if "\0" in str(path):
        # `os.open` raises ValueError for it; no file has such a name.
        raise OSError(errno.EINVAL, "a path with a NUL byte", str(path))
    try:
        fd = os.open(path, _FLAGS)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit:,} bytes", str(path))
    return data


def parse_index(data: bytes, hash_bytes: int = 20) -> list[str]:
    """The paths of the file entries of an index (format 2, 3 or 4) in `data`."""
    if len(data) < _HEADER.size + hash_bytes:
        raise IndexFormatError("shorter than an index")
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC":
        raise IndexFormatError("not an index: no DIRC signature")
    if version not in (2, 3, 4):
        raise IndexFormatError(f"index version {version}, not 2, 3 or 4")
    _check_sum(data, hash_bytes)
    end = len(data) - hash_bytes
    reader = _Entries(data, end, version, hash_bytes)
    paths = [path for path in (reader.next() for _ in range(count)) if path is not None]
    _check_extensions(data, reader.pos, end)
    return paths


def _check_sum(data: bytes, hash_bytes: int) -> None:
    """The trailing hash, unless zero (`index.skipHash`, which `feature.manyFiles` sets)."""
    trailer = data[-hash_bytes:]
    if trailer == bytes(hash_bytes):
        return
    digest = hashlib.sha256 if hash_bytes == 32 else hashlib.sha1
    if digest(data[:-hash_bytes]).digest() != trailer:
        raise IndexFormatError("its checksum does not match")


def _check_extensions(data: bytes, pos: int, end: int) -> None:
    """Extensions follow the entries; a split index (`link`) keeps most entries elsewhere."""
    while pos < end:
        if pos + 8 > end:
            raise IndexFormatError("an extension runs past the end")
        signature, size = struct.unpack_from(">4sI", data, pos)
        if signature == b"link":
            raise IndexFormatError(_SPLIT)
        pos += 8 + size
    if pos != end:
        raise IndexFormatError("an extension runs past the end")


def _fits(actual: int, length: int) -> bool:
    return actual >= length if length == _NAME_MASK else actual == length


class _Entries:
    """Reads one entry after another; v4 paths are compressed against the previous one."""

    def __init__(self, data: bytes, end: int, version: int, hash_bytes: int) -> None:
        self._data, self._end, self._version, self._hash = data, end, version, hash_bytes
        self.pos = _HEADER.size
        self._previous = b""
        self._budget = _MAX_PATHS_BYTES

    def next(self) -> str | None:
        """The next entry's path, or None when it is not a file (a gitlink, a directory)."""
        data, start = self._data, self.pos
        flags_at = start + _STAT_BYTES + self._hash
        if flags_at + 2 > self._end:
            raise IndexFormatError("an entry runs past the end")
        mode = struct.unpack_from(">I", data, start + 24)[0]
        flags = struct.unpack_from(">H", data, flags_at)[0]
        if not flags & _NAME_MASK:
            # Only a split index writes an entry without its name (git's CE_STRIP_NAME):
            # the shared index holds it. Said before the name, which is then no path at all.
            raise IndexFormatError(_SPLIT)
        name_at = flags_at + 2
        if flags & _EXTENDED:
            if self._version < 3:
                raise IndexFormatError("an extended entry in a version 2 index")
            name_at += 2
        path = self._v4_path(name_at) if self._version == 4 else self._padded_path(start, name_at)
        length = flags & _NAME_MASK
        # The length field holds the path's length, or 0xFFF for any longer.
        if not path or path.startswith(b"/") or not _fits(len(path), length):
            raise IndexFormatError("an entry's path is malformed")
        self._budget -= len(path)
        if len(path) > _MAX_PATH_BYTES or self._budget < 0:
            raise IndexFormatError("its paths are longer than any work tree's")
        self._previous = path
        return os.fsdecode(path) if mode & 0o170000 in _FILE_KINDS else None

    def _padded_path(self, start: int, name_at: int) -> bytes:
        """Versions 2 and 3: NUL-terminated, then NULs to a multiple of 8 bytes."""
        nul = self._nul(name_at)
        self.pos = start + ((nul - start) // 8 + 1) * 8
        if self.pos > self._end:
            raise IndexFormatError("an entry runs past the end")
        return self._data[name_at:nul]

    def _v4_path(self, at: int) -> bytes:
        """Version 4: how many bytes to drop from the previous path, then the rest of this."""
        strip, at = self._varint(at)
        if strip > len(self._previous):
            raise IndexFormatError("an entry's path is malformed")
        nul = self._nul(at)
        self.pos = nul + 1
        return self._previous[: len(self._previous) - strip] + self._data[at:nul]

    def _varint(self, at: int) -> tuple[int, int]:
        """Git's offset varint (each continuation adds one before shifting)."""
        value = -1
        for _ in range(10):
            if at >= self._end:
                break
            byte = self._data[at]
            at += 1
            value = ((value + 1) << 7) | (byte & 0x7F)
            if not byte & 0x80:
                return value, at
        raise IndexFormatError("an entry's path is malformed")

    def _nul(self, at: int) -> int:
        nul = self._data.find(b"\0", at, self._end)
        if nul < 0:
            raise IndexFormatError("an entry runs past the end")
        return nul
