"""The commands a service serves now, whether they are admitted, and each change of them."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Mapping

import anyio

from jigcmd.errors import Code, JigError
from jigcmd.policy.binding import CommandPolicy
from jigcmd.policy.lock import Admission
from jigcmd.policy.request import ValidRequest, validate_request
from jigcmd.protocol.commands import ToolInfo

__all__ = ["AdmissionCheck", "Catalog"]

AdmissionCheck = Callable[[], Admission]


class Catalog:
    """The Binding's commands under one admission, replaced whole by `readmit`."""

    def __init__(
        self,
        commands: Mapping[str, CommandPolicy],
        admission: Admission,
        runtime_check: AdmissionCheck | None,
    ) -> None:
        self._commands = dict(commands)
        self._admission = admission
        # Hashing the Bun binary is deferred to the first call (or a warm-up), off the
        # server's path to its first answer.
        self._runtime_check = runtime_check
        # `warm_up` (a worker thread) and `readmit` (the loop) replace the admission under it.
        self._replacing = threading.Lock()
        # Set (and replaced) when `readmit` changes the catalog.
        self._changed: anyio.Event | None = None

    async def changes(self) -> AsyncIterator[list[ToolInfo]]:
        """The catalog each time `readmit` changes it."""
        while True:
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()
            yield self.tools()

    def readmit(
        self,
        commands: Mapping[str, CommandPolicy],
        admission: Admission,
        runtime_check: AdmissionCheck | None,
    ) -> bool:
        """Serve these commands under this admission from now on; whether the catalog changed.

        Calls already running keep the plan they were admitted with.
        """
        before = self.tools()
        with self._replacing:
            self._commands = dict(commands)
            self._admission = admission
            self._runtime_check = runtime_check
        changed = self.tools() != before
        if changed and self._changed is not None:
            self._changed.set()
            self._changed = None
        return changed

    @property
    def commands(self) -> Mapping[str, CommandPolicy]:
        """The commands served now."""
        return self._commands

    def tools(self) -> list[ToolInfo]:
        """Every configured command, with the reason it is unavailable when not admitted."""
        reason = None if self._admission.admitted else self._admission.reason
        return [
            ToolInfo(name=name, kind=policy.kind, unavailable=reason, paths=policy.paths)
            for name, policy in self._commands.items()
        ]

    def warm_up(self) -> None:
        """Run the deferred runtime admission check now (from a worker thread)."""
        check = self._runtime_check
        if check is not None and self._admission.admitted:
            admission = check()
            # A `readmit` while it hashed (drift, a new lock) stands: the check was of the
            # admission it replaced, and would otherwise admit a drifted Binding again.
            with self._replacing:
                if self._runtime_check is check:
                    self._admission = admission
                    self._runtime_check = None

    async def check_admission(self, command: object) -> None:
        """Raise `UNAVAILABLE` unless the Binding is admitted (a lock, no drift), whatever input."""
        if self._runtime_check is not None:
            await anyio.to_thread.run_sync(self.warm_up)
        if not self._admission.admitted:
            # Drift is what the caller must fix first: input checked against a Binding
            # nobody admitted would only send them after the wrong problem.
            named = f"command {command!r}: " if isinstance(command, str) else ""
            raise JigError(Code.UNAVAILABLE, named + self._admission.reason)

    def command_paths(self, command: str) -> tuple[str, ...]:
        """The files an admitted command names (its tests or its entry point); () if none."""
        policy = self._commands.get(command)
        return () if policy is None else policy.paths

    def validate(self, input: object) -> ValidRequest:
        """Apply every request rule; raises `INVALID_INPUT` naming the rule that failed."""
        return validate_request(input, self._commands)
