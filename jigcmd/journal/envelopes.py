"""The registry of envelopes that exist: one small file per envelope, for recovery.

Every supervisor registers its envelope before creating it (before any request exists)
and removes the entry once the envelope's release was confirmed. Recovery fences and
removes what a dead server's envelopes left behind, claimed by a run or still idle.

Files, not the SQLite journal: envelopes are prepared while other processes write the
journal, and SQLite serialises writers across processes (a busy writer waits for the lock,
tens of milliseconds). Nor is an fsync needed: what the registry describes (processes and
cgroups) does not survive a reboot either. A rename makes each entry appear whole.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import msgspec

from jigcmd.journal.identity import ProcessIdentity

__all__ = ["EnvelopeEntry", "EnvelopeRegistry"]

_SUFFIX = ".envelope"


class EnvelopeEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An envelope that exists: its cgroup job, its supervisor and the server it serves."""

    name: str
    supervisor: ProcessIdentity
    owner: ProcessIdentity


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(EnvelopeEntry)


class EnvelopeRegistry:
    """`<state>/envelopes/<name>.envelope`, one JSON entry per envelope."""

    def __init__(self, state_dir: Path) -> None:
        self.directory = state_dir / "envelopes"

    def register(self, entry: EnvelopeEntry) -> None:
        """Record `entry` (raises OSError)."""
        self.directory.mkdir(mode=0o700, exist_ok=True)
        final = self.directory / (entry.name + _SUFFIX)
        partial = self.directory / (entry.name + ".partial")
        partial.write_bytes(_encoder.encode(entry))
        os.replace(partial, final)

    def drop(self, name: str) -> None:
        """Forget an envelope whose release was confirmed."""
        with contextlib.suppress(FileNotFoundError):
            (self.directory / (name + _SUFFIX)).unlink()

    def entries(self) -> list[EnvelopeEntry]:
        """Every registered envelope; unreadable entries are skipped (they are half-written)."""
        try:
            names = sorted(self.directory.iterdir())
        except FileNotFoundError:
            return []
        found: list[EnvelopeEntry] = []
        for path in names:
            if path.suffix != _SUFFIX:
                continue
            with contextlib.suppress(OSError, msgspec.DecodeError, msgspec.ValidationError):
                found.append(_decoder.decode(path.read_bytes()))
        return found
