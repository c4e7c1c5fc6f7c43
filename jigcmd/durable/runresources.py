"""Per-run resources kept in the state directory: what a call's result links to.

After a call, the fronts that ask for it keep the run's full captured streams and the
runner's JUnit report (and, from other work, more: `register_kind`) under
`<state dir>/resources/`, one directory per caller scope (the caller's run, else the session)
and operation. `resources/read` serves them back, byte for byte the bytes whose SHA-256 the
result gave, and only to the scope that made them: the URI names the scope, and a session
reads only its own. The newest `KEEP_OPERATIONS` operations of each scope are kept (and at
most an eighth more, pruned in batches).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from jigcmd.protocol.commands import ResourceRef

__all__ = [
    "KEEP_OPERATIONS",
    "KINDS",
    "URI_PREFIX",
    "ResourceKind",
    "ResourceNotFound",
    "RunResources",
    "register_kind",
    "resource_uri",
]

URI_PREFIX: Final = "jigcmd://run/"
KEEP_OPERATIONS: Final = 256
_DIR: Final = "resources"


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


class RunResources:
    """The per-run resources of one state directory."""

    def __init__(self, state_dir: Path, keep: int = KEEP_OPERATIONS) -> None:
        self._root = state_dir / _DIR
        self._keep = keep

    def _operation_dir(self, scope: str, operation_id: str) -> Path:
        return self._root / _hashed(scope) / _hashed(operation_id)

    def put(
        self, scope: str, operation_id: str, name: str, data: bytes, *, prune: bool = True
    ) -> ResourceRef:
        """Keep `data` as this operation's resource `name`; its reference for the result.

        `prune=False` leaves the scope's pruning to the caller (`crowded`, `prune`).
        """
        kind = KINDS[name]
        directory = self._operation_dir(scope, operation_id)
        fresh = not directory.exists()
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = directory / f".{name}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(temporary, directory / name)
        if fresh and prune:
            self._prune(directory.parent)
        return ResourceRef(
            uri=resource_uri(scope, operation_id, name),
            name=name,
            mime_type=kind.mime_type,
            size=len(data),
            sha256="sha256:" + hashlib.sha256(data).hexdigest(),
            description=kind.description,
        )

    def read(self, scope: str, uri: str) -> tuple[bytes, ResourceKind]:
        """The bytes of `uri` and their kind, for a caller of `scope`; `ResourceNotFound` else."""
        owner, operation, name = _parse(uri)
        if owner != scope:
            raise ResourceNotFound("this resource belongs to another run; a session reads its own")
        kind = KINDS.get(name)
        if kind is None:
            raise ResourceNotFound(f"no resource named {name!r} (known: {', '.join(KINDS)})")
        try:
            data = (self._operation_dir(scope, operation) / name).read_bytes()
        except FileNotFoundError:
            raise ResourceNotFound(
                f"operation {operation!r} kept no {name} (unknown, or no longer kept)"
            ) from None
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
            entries = sorted(
                (scope_dir / name for name in names), key=lambda entry: entry.stat().st_mtime_ns
            )
        except OSError:
            return
        for stale in entries[: max(0, len(entries) - self._keep)]:
            with contextlib.suppress(OSError):
                shutil.rmtree(stale)
