"""Per-run resources kept in the state directory: what a call's result links to.

After a call, the fronts that ask for it keep the run's full captured streams and the
runner's JUnit report (and, from other work, more: `register_kind`) under
`<state dir>/resources/`: one directory per caller scope (the caller's run, else the
session), one file per operation holding all its resources (`keep`). `resources/read` serves
them back, byte for byte the bytes whose SHA-256 the result gave, and only to the scope that
made them: the URI names the scope, and a session reads only its own. The newest
`KEEP_OPERATIONS` operations of each scope are kept (and at most an eighth more, pruned in
batches).

One file, not a directory of files: a call keeps up to four (its streams, the JUnit report,
the statement), and a new directory and a new inode each are among a file system's dearest
small operations (docs/performance.md, twelfth round). An operation kept before 2026-12-05
is a directory with a file per resource: still read, and pruned alike.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import stat
import struct
import urllib.parse
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from jigcmd.journal.statefiles import subdirectory
from jigcmd.protocol.commands import ResourceRef

__all__ = [
    "KEEP_OPERATIONS",
    "KINDS",
    "URI_PREFIX",
    "ResourceKind",
    "ResourceNotFound",
    "ResourcesPruned",
    "RunResources",
    "register_kind",
    "resource_uri",
]

URI_PREFIX: Final = "jigcmd://run/"
KEEP_OPERATIONS: Final = 256
_DIR: Final = "resources"
# A scope's or an operation's name in it: the first 32 hex digits of its SHA-256 (`_hashed`).
_OWN_NAME: Final = re.compile(r"[0-9a-f]{32}")
# An operation's file: this line, then each resource as its name's and its data's lengths,
# its name (UTF-8) and its data.
_MAGIC: Final = b"jigcmd-resources/1\n"
_PART: Final = struct.Struct(">HQ")


@dataclass(frozen=True, slots=True)
class ResourceKind:
    """What one named per-run resource is: its MIME type and a line a model reads."""

    name: str
    mime_type: str
    description: str


KINDS: dict[str, ResourceKind] = {}


def register_kind(kind: ResourceKind) -> None:
    """Make `kind.name` a resource name runs may keep (the name is one URI segment)."""
    if not kind.name or "/" in kind.name or kind.name in (".", ".."):
        raise ValueError(f"resource name {kind.name!r} is not one path segment")
    KINDS[kind.name] = kind


for _kind in (
    ResourceKind("stdout", "text/plain; charset=utf-8", "The run's captured stdout (64 KiB kept)."),
    ResourceKind("stderr", "text/plain; charset=utf-8", "The run's captured stderr (64 KiB kept)."),
    ResourceKind(
        "junit",
        "application/xml",
        "Bun's JUnit report, as the runner wrote it (candidate-influenced).",
    ),
    ResourceKind(
        "attestation",
        "application/jsonl",
        "The run's signed statement: an in-toto bundle of DSSE envelopes (`jigcmd verify`).",
    ),
):
    register_kind(_kind)


class ResourceNotFound(LookupError):
    """No such resource for this caller; the message says which part is wrong."""


def resource_uri(scope: str, operation_id: str, name: str) -> str:
    """The URI of one run's resource: the caller's scope, the operation, the name."""
    quote = urllib.parse.quote
    return f"{URI_PREFIX}{quote(scope, safe='')}/{quote(operation_id, safe='')}/{name}"


def _parse(uri: str) -> tuple[str, str, str]:
    if not uri.startswith(URI_PREFIX):
        raise ResourceNotFound(f"not a jigcmd run resource (expected {URI_PREFIX}…)")
    parts = uri[len(URI_PREFIX) :].split("/")
    if len(parts) != 3 or not all(parts):
        raise ResourceNotFound(f"expected {URI_PREFIX}<run>/<operation>/<name>")
    scope, operation, name = (urllib.parse.unquote(part) for part in parts)
    return scope, operation, name


def _hashed(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _packed(parts: Sequence[tuple[str, bytes]]) -> bytes:
    chunks = [_MAGIC]
    for name, data in parts:
        encoded = name.encode("utf-8")
        chunks += [_PART.pack(len(encoded), len(data)), encoded, data]
    return b"".join(chunks)


def _unpacked(blob: bytes) -> dict[str, bytes]:
    """The resources an operation's file holds; ValueError when it is not one whole."""
    if not blob.startswith(_MAGIC):
        raise ValueError("it does not start as a jigcmd resources file")
    parts: dict[str, bytes] = {}
    at = len(_MAGIC)
    while at < len(blob):
        if at + _PART.size > len(blob):
            raise ValueError("it ends inside a resource's header")
        name_size, data_size = _PART.unpack_from(blob, at)
        at += _PART.size
        end = at + name_size + data_size
        if end > len(blob):
            raise ValueError("it ends inside a resource")
        parts[blob[at : at + name_size].decode("utf-8", "replace")] = blob[at + name_size : end]
        at = end
    return parts


@dataclass(frozen=True, slots=True)
class ResourcesPruned:
    """What `RunResources.prune_before` removed (or, dry, would remove)."""

    operations: int
    scopes: int
    removed_bytes: int


class RunResources:
    """The per-run resources of one state directory."""

    def __init__(self, state_dir: Path, keep: int = KEEP_OPERATIONS) -> None:
        self._root = state_dir / _DIR
        self._keep = keep

    def _operation_path(self, scope: str, operation_id: str) -> Path:
        return self._root / _hashed(scope) / _hashed(operation_id)

    def keep(
        self,
        scope: str,
        operation_id: str,
        parts: Sequence[tuple[str, bytes]],
        *,
        prune: bool = True,
    ) -> tuple[ResourceRef, ...]:
        """Keep `parts` (name, data) as this operation's resources, replacing what it had.

        One file, written whole and then renamed into place: a reader never sees half of it.
        `prune=False` leaves the scope's pruning to the caller (`crowded`, `prune`).
        """
        kinds = [KINDS[name] for name, _ in parts]
        path = self._operation_path(scope, operation_id)
        self._write(path, _packed(parts))
        if prune:
            self._prune(path.parent)
        return tuple(
            _reference(scope, operation_id, kind, data)
            for kind, (_, data) in zip(kinds, parts, strict=True)
        )

    def put(
        self, scope: str, operation_id: str, name: str, data: bytes, *, prune: bool = True
    ) -> ResourceRef:
        """Keep `data` as this operation's resource `name`, beside the others it has."""
        parts = self._parts(scope, operation_id) or {}
        parts[name] = data
        refs = self.keep(scope, operation_id, list(parts.items()), prune=prune)
        return next(ref for ref in refs if ref.name == name)

    def read(self, scope: str, uri: str) -> tuple[bytes, ResourceKind]:
        """The bytes of `uri` and their kind, for a caller of `scope`; `ResourceNotFound` else."""
        owner, operation, name = _parse(uri)
        if owner != scope:
            raise ResourceNotFound("this resource belongs to another run; a session reads its own")
        kind = KINDS.get(name)
        if kind is None:
            raise ResourceNotFound(f"no resource named {name!r} (known: {', '.join(KINDS)})")
        data = (self._parts(scope, operation) or {}).get(name)
        if data is None:
            raise ResourceNotFound(
                f"operation {operation!r} kept no {name} (unknown, or no longer kept)"
            )
        return data, kind

    def crowded(self, scope: str) -> bool:
        """Whether `scope` holds a batch of operations more than it keeps (`prune` is due).

        One directory read, so cheap enough for an event loop; the prune itself reads every
        kept operation's age and removes a batch of them.
        """
        try:
            return self._over(len(os.listdir(self._root / _hashed(scope))))
        except OSError:
            return False

    def prune(self, scope: str) -> None:
        """Keep the newest operations of `scope` (blocking: many reads and removals)."""
        self._prune(self._root / _hashed(scope))

    def size(self) -> int:
        """The bytes every scope's kept operations hold (0 when none was kept)."""
        return sum(_size(scope_dir) for scope_dir in _entries(self._root))

    def prune_before(
        self,
        cutoff_s: float,
        *,
        pruned: Collection[tuple[str, str]],
        open_keys: Collection[tuple[str, str]],
        dry_run: bool = False,
    ) -> ResourcesPruned:
        """Remove the operations of `pruned` (scope, operation id) and every other one kept
        before `cutoff_s` (Unix seconds) but those of `open_keys`; then each scope left empty
        that nothing was kept in since `cutoff_s`. `dry_run`: count only."""
        doomed = {tuple(map(_hashed, key)) for key in pruned}
        spared = {tuple(map(_hashed, key)) for key in open_keys}
        operations = scopes = removed = 0
        for scope_dir in _entries(self._root):
            try:
                # Read before anything in it is removed (which makes it new).
                idle = scope_dir.lstat().st_mtime < cutoff_s
            except OSError:
                continue
            left = 0
            for entry in _entries(scope_dir):
                key = (scope_dir.name, entry.name)
                if key in spared or (key not in doomed and not _older(entry, cutoff_s)):
                    left += 1
                    continue
                size = _size(entry)
                if dry_run or _remove(entry):
                    operations += 1
                    removed += size
                else:
                    left += 1
            # A server keeping its scope's first operation makes the directory anew, and a
            # temporary file in it keeps rmdir from removing one being written to.
            if idle and not left and (dry_run or _rmdir(scope_dir)):
                scopes += 1
        return ResourcesPruned(operations, scopes, removed)

    def _write(self, path: Path, blob: bytes) -> None:
        """Write `blob` as `path` (`<resources>/<scope>/<operation>`) through held descriptors.

        `resources/` is the state directory's checked sub-directory and the scope's directory
        is opened in it with no link followed (`jigcmd.journal.statefiles`): a path re-pointed
        after the state directory was checked cannot send the write elsewhere.
        """
        scope = self._scope_fd(path.parent.name)
        try:
            # Its own name per process: two servers may keep one operation for one scope at once.
            temporary = f".{path.name}.{os.getpid()}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temporary, flags, 0o600, dir_fd=scope)
            try:
                view = memoryview(blob)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            try:
                os.replace(temporary, path.name, src_dir_fd=scope, dst_dir_fd=scope)
            except IsADirectoryError:
                # The same operation kept before 2026-12-05, as a directory.
                shutil.rmtree(path.name, dir_fd=scope)
                os.replace(temporary, path.name, src_dir_fd=scope, dst_dir_fd=scope)
        finally:
            os.close(scope)

    def _scope_fd(self, name: str) -> int:
        """A descriptor of the scope directory `name` in `resources/`, made 0700 if missing."""
        root = subdirectory(self._root.parent, _DIR, create=True)
        assert root is not None  # made when missing
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            return os.open(name, flags, dir_fd=root)
        except FileNotFoundError:
            # The scope's first operation: its directory is made once, not looked for each time.
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o700, dir_fd=root)
            return os.open(name, flags, dir_fd=root)

    def _parts(self, scope: str, operation_id: str) -> dict[str, bytes] | None:
        """What the operation kept (None: nothing)."""
        path = self._operation_path(scope, operation_id)
        try:
            blob = self._read(path)
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            return _old_parts(path)
        try:
            return _unpacked(blob)
        except ValueError as exc:
            raise ResourceNotFound(
                f"operation {operation_id!r}'s kept resources are unreadable: {exc}"
            ) from None

    def _read(self, path: Path) -> bytes:
        """The bytes of `path` (`<resources>/<scope>/<operation>`), no link followed.

        Through the state directory's held descriptor (`jigcmd.journal.statefiles`): what is
        served back to a caller is only ever a file jigcmd kept, never what a link names.
        """
        root = subdirectory(self._root.parent, _DIR, create=False)
        if root is None:
            raise FileNotFoundError(path)
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        scope = os.open(path.parent.name, flags, dir_fd=root)
        try:
            # Not waiting on a FIFO left there: only a regular file (or an old directory) is read.
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(path.name, flags, dir_fd=scope)
        finally:
            os.close(scope)
        with open(fd, "rb") as handle:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(path)
            if not stat.S_ISREG(mode):
                raise OSError(errno.EINVAL, f"{path} is not a regular file")
            return handle.read()

    def _over(self, count: int) -> bool:
        return count > self._keep + max(1, self._keep // 8)

    def _prune(self, scope_dir: Path) -> None:
        """Keep the newest `keep` operations of one scope, pruning in batches.

        Names are listed each time (one directory read); only past an eighth more than
        `keep` are the operations' ages read and the oldest removed, so that a call does
        not stat every kept operation (256 of them) to remove one.
        """
        try:
            names = os.listdir(scope_dir)
            if not self._over(len(names)):
                return
            entries = sorted(_entries(scope_dir), key=lambda entry: entry.lstat().st_mtime_ns)
        except OSError:
            return
        for stale in entries[: max(0, len(entries) - self._keep)]:
            _remove(stale)


def _reference(scope: str, operation_id: str, kind: ResourceKind, data: bytes) -> ResourceRef:
    return ResourceRef(
        uri=resource_uri(scope, operation_id, kind.name),
        name=kind.name,
        mime_type=kind.mime_type,
        size=len(data),
        sha256="sha256:" + hashlib.sha256(data).hexdigest(),
        description=kind.description,
    )


def _entries(directory: Path) -> list[Path]:
    """The entries jigcmd named in `directory` (32 hex digits, `_hashed`), none through a link.

    What is removed is only ever what jigcmd wrote: a scope that is a symbolic link (to a
    directory anywhere) is not entered, and a name of another shape is not jigcmd's.
    """
    try:
        if directory.is_symlink():
            return []
        names = os.listdir(directory)
    except OSError:
        return []
    return [directory / name for name in names if _OWN_NAME.fullmatch(name)]


def _size(entry: Path) -> int:
    """An operation's bytes: its file, or the files of one kept as a directory."""
    try:
        if entry.is_dir() and not entry.is_symlink():
            return sum(_size(part) for part in _entries(entry))
        return entry.lstat().st_size
    except OSError:
        return 0


def _older(entry: Path, cutoff_s: float) -> bool:
    try:
        return entry.lstat().st_mtime < cutoff_s
    except OSError:
        return False


def _remove(entry: Path) -> bool:
    try:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    except OSError:
        return False  # gone already, or not ours to remove: counted as left
    return True


def _rmdir(directory: Path) -> bool:
    try:
        directory.rmdir()
    except OSError:
        return False
    return True


def _old_parts(directory: Path) -> dict[str, bytes]:
    """An operation kept as a directory with a file per resource (before 2026-12-05)."""
    parts = {}
    for name in (n for n in os.listdir(directory) if n in KINDS):
        with contextlib.suppress(FileNotFoundError):
            parts[name] = (directory / name).read_bytes()
    return parts
