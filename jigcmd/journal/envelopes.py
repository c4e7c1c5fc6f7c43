"""The registry of envelopes that exist: one small file per envelope, for recovery.

Every supervisor registers its envelope before creating it (before any request exists)
and removes the entry once the envelope's release was confirmed. Recovery fences and
removes what a dead server's envelopes left behind, claimed by a run or still idle.

Files, not the SQLite journal: envelopes are prepared while other processes write the
journal, and SQLite serialises writers across processes (a busy writer waits for the lock,
tens of milliseconds). Nor is an fsync needed: what the registry describes (processes and
cgroups) does not survive a reboot either. Nor a rename: an entry is one `write` of a few
hundred bytes to a file made for it (`O_EXCL`), which a process's death cannot cut in half,
and it is written before its cgroup job exists; an entry left empty by a death between the
two calls is skipped by readers, and no job exists for it to name.

The zygote writes entries with the standard library's `json` (an entry is the JSON array of
its fields, as msgspec encodes a NamedTuple): msgspec stays out of the image every pid 1 is
cloned from. Recovery reads them with msgspec, which checks every field.
"""

from __future__ import annotations

import contextlib
import errno
import json  # noqa: TID251 - encoding only, in the zygote (the module docstring); read with msgspec
import os
from json.encoder import encode_basestring  # noqa: TID251 - likewise
from typing import NamedTuple

from jigcmd.journal.identity import ProcessIdentity
from jigcmd.journal.statefiles import open_regular, subdirectory

__all__ = ["EnvelopeEntry", "EnvelopeRegistry"]

_SUFFIX = ".envelope"
_DIRECTORY = "envelopes"


class EnvelopeEntry(NamedTuple):
    """An envelope that exists: its cgroup job, its supervisor and the server it serves."""

    name: str
    supervisor: ProcessIdentity
    owner: ProcessIdentity


class EnvelopeRegistry:
    """`<state>/envelopes/<name>.envelope`, one JSON entry per envelope."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self._state_dir = state_dir
        self.directory = os.path.join(os.fspath(state_dir), _DIRECTORY)
        self._prefix = f"{self.directory}/"
        # The entry's supervisor and owner, encoded once: they are the zygote's own and its
        # server's for all its life, and `json.dumps` per entry wrote ~40 more pages after a
        # clone than quoting the name alone (docs/envelope.md).
        self._identities: tuple[tuple[ProcessIdentity, ProcessIdentity], str] | None = None

    def create(self) -> None:
        """Make the directory if need be (the zygote, as it starts); `register` never does."""
        subdirectory(self._state_dir, _DIRECTORY, create=True)

    def _fd(self) -> int:
        """The held, checked descriptor of the directory (FileNotFoundError: none)."""
        fd = subdirectory(self._state_dir, _DIRECTORY, create=False)
        if fd is None:
            raise FileNotFoundError(errno.ENOENT, "no envelope registry", self.directory)
        return fd

    def register(self, entry: EnvelopeEntry) -> None:
        """Record `entry` (raises OSError; FileExistsError if an entry of that name exists).

        A directory gone (a state directory removed under a live server) is an error: it is
        never made again here, half inside a directory being removed, and nothing is started
        that its recovery could not find.
        """
        data = self._encoded(entry)
        name = entry.name + _SUFFIX
        directory = self._fd()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, 0o600, dir_fd=directory)
        except OSError as exc:
            # Opened beside its directory's descriptor: the error would name no path.
            raise OSError(exc.errno, exc.strerror, self._prefix + name) from exc
        try:
            if os.write(fd, data) != len(data):
                raise OSError(errno.EIO, "short write of an envelope entry", self._prefix + name)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=directory)
            raise
        os.close(fd)

    def _encoded(self, entry: EnvelopeEntry) -> bytes:
        """`entry` as the JSON array msgspec reads it as (an `EnvelopeEntry`)."""
        identities = (entry.supervisor, entry.owner)
        if self._identities is None or self._identities[0] != identities:
            self._identities = identities, json.dumps(identities, separators=(",", ":"))
        # "[[supervisor],[owner]]" with the name quoted in front of them.
        return f"[{encode_basestring(entry.name)},{self._identities[1][1:]}".encode()

    def drop(self, name: str) -> None:
        """Forget an envelope whose release was confirmed."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name + _SUFFIX, dir_fd=self._fd())

    def entries(self) -> list[EnvelopeEntry]:
        """Every registered envelope; unreadable entries are skipped (they are half-written)."""
        # Imported here: the zygote registers and drops entries, and never reads them.
        import msgspec  # noqa: PLC0415 - see the comment above

        try:
            directory = self._fd()
        except FileNotFoundError:
            return []
        names = sorted(os.listdir(directory))
        decoder = msgspec.json.Decoder(EnvelopeEntry)
        found: list[EnvelopeEntry] = []
        for name in names:
            if not name.endswith(_SUFFIX):
                continue
            with contextlib.suppress(OSError, msgspec.DecodeError):
                # No link followed, no FIFO waited on: an entry is a file the zygote wrote.
                fd = open_regular(directory, name, os.O_RDONLY, self._prefix + name)
                with open(fd, "rb") as handle:
                    found.append(decoder.decode(handle.read()))
        return found
