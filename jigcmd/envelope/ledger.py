"""The envelope's one door to durable state: its registry entry, and a lost run's row.

Everything the supervisor records goes through here. The journal is opened only when the
server died mid-run (`Owner.lost`), and imported only then: SQLite serialises writers across
processes, nothing on a run's path should wait for that lock, and the zygote that every
envelope process is forked from stays without the journal's modules in its image.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from jigcmd.journal import identity, liveness
from jigcmd.journal.envelopes import EnvelopeEntry, EnvelopeRegistry

if TYPE_CHECKING:
    from jigcmd.envelope.messages import Launch
    from jigcmd.journal.identity import ProcessIdentity

__all__ = ["Owner", "Registration", "Registry", "forget"]


class Registry:
    """Where envelopes register themselves, the server they are prepared for and who supervises."""

    __slots__ = ("files", "owner", "state_dir", "supervisor")

    def __init__(
        self, state_dir: str, owner: ProcessIdentity, supervisor: ProcessIdentity | None = None
    ) -> None:
        self.state_dir = state_dir
        self.owner = owner
        # The zygote, which supervises every envelope it registers (found once, at its start).
        self.supervisor = supervisor or identity.current()
        self.files = EnvelopeRegistry(state_dir)
        # Once, as the zygote starts; if it cannot be made, every registration fails closed.
        with contextlib.suppress(OSError):
            self.files.create()

    def hold_liveness(self) -> None:
        """Hold the supervisor's liveness lock for its life (`jigcmd.journal.liveness`).

        Called after the zygote's last start-time fork (its spawner's), so that no process
        forked from it shares the lock: every pid 1 is the spawner's or closes what it got.
        Without it (a failure, told nowhere else) another PID namespace's recovery does not
        wait for this supervisor to fence its runs, and fences them through their cgroups.
        """
        with contextlib.suppress(OSError):
            liveness.hold(self.state_dir)


class Registration:
    """One envelope's entry in the registry, from before it exists until it is released."""

    def __init__(self, registry: Registry | None) -> None:
        self._registry = registry
        self._name: str | None = None

    def register(self, name: str) -> None:
        """Record that envelope `name` is about to exist (recovery then knows its job)."""
        registry = self._registry
        if registry is not None:
            registry.files.register(
                EnvelopeEntry(name=name, supervisor=registry.supervisor, owner=registry.owner)
            )
            self._name = name

    def drop(self) -> None:
        """The envelope's release was confirmed: nothing is left for recovery."""
        if self._registry is not None and self._name is not None:
            with contextlib.suppress(OSError):
                self._registry.files.drop(self._name)
            self._name = None


def forget(state_dir: str, name: str) -> None:
    """Drop envelope `name`'s entry (the zygote released a dead supervisor's envelope)."""
    with contextlib.suppress(OSError):
        EnvelopeRegistry(state_dir).drop(name)


class Owner:
    """The journal row a run answers to, for the one case only the supervisor can record.

    The server records every outcome it sees. When the server dies mid-run, the supervisor
    fences the run and closes the row itself (with the cleanup it proved, see `lost`).
    """

    def __init__(self, state_dir: str, operation_id: str, root_run: str) -> None:
        self.state_dir = state_dir
        self.operation_id = operation_id
        self.root_run = root_run

    @classmethod
    def of(cls, launch: Launch) -> Owner | None:
        """The owner named by `launch`, if it has a journal row."""
        if launch.operation_id is None or launch.state_dir is None:
            return None
        return cls(launch.state_dir, launch.operation_id, launch.root_run)

    def lost(self, cleanup_complete: bool, problems: tuple[str, ...]) -> None:
        """The server went away mid-run: close the row, with the cleanup proved.

        Uncertain, unless the server had recorded the run's evidence before it went and the
        cleanup is proved: then the row is done with that evidence.
        """
        import sqlite3  # noqa: PLC0415 - only when the server died (the module docstring)
        from pathlib import Path  # noqa: PLC0415 - likewise

        from jigcmd.journal.store import Journal, JournalError  # noqa: PLC0415 - likewise

        with (
            contextlib.suppress(OSError, JournalError, sqlite3.Error),
            Journal.open(Path(self.state_dir)) as journal,
        ):
            journal.close_lost(
                self.operation_id,
                root_run=self.root_run,
                reason="the server went away during the run; the run was fenced without a "
                "proved result",
                cleanup_complete=cleanup_complete,
                problems="; ".join(problems),
            )
