"""The hostile suite's runner: the whole command path on a traced executor, and host listeners.

`Hostile.run` sends a candidate through `CommandService` (validation, plan, envelope,
evidence), then checks what every case must leave true: the evidence is schema-valid with
`cleanup: "complete"` and the Bun binary is untouched (the traced executor has already proved
that nothing of the envelope is left on the host).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from jigcmd.cancel import CancelSignal
from jigcmd.command.runtime import BunBinary
from jigcmd.command.service import CommandService
from jigcmd.envelope.api import RunOutcome
from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence
from jigcmd.policy.binding import CommandPolicy
from jigcmd.policy.lock import ADMITTED
from tests.envelope.hostile_harness import PROBE_TS, Attempt, TracedExecutor, attempts, schema_valid

__all__ = ["MAIN", "Case", "HostServices", "Hostile", "refused"]

MAIN = CommandPolicy(name="main", kind="run", paths=("main.ts",))


@dataclass(frozen=True)
class Case:
    """What one hostile run produced: schema-checked evidence, the outcome, reported attempts."""

    evidence: Evidence
    outcome: RunOutcome
    attempts: dict[str, Attempt]


class Hostile:
    """Runs candidates through the whole command path and checks the host after each."""

    def __init__(self, envelope: TracedExecutor, runtime: BunBinary) -> None:
        self.envelope = envelope
        self.runtime = runtime
        self.bun_stat = self._bun_stat()
        self.service = CommandService(
            {"main": MAIN}, admission=ADMITTED, runtime=runtime, executor=envelope
        )

    def _bun_stat(self) -> tuple[int, ...]:
        st = os.stat(self.runtime.path)
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)

    async def run(
        self,
        source: str,
        *,
        args: Sequence[str] = (),
        stdin: str = "",
        seconds: float | None = None,
        files: dict[str, str] | None = None,
    ) -> Case:
        request = {
            "command": "main",
            "files": {"main.ts": source, "probe.ts": PROBE_TS, **(files or {})},
            "args": list(args),
            "stdin": stdin,
        }
        deadline = None if seconds is None else time.time_ns() // 1_000_000 + int(seconds * 1000)
        failure: JigError | None = None
        try:
            result = await self.service.run(
                request, operation_id="hostile", deadline_unix_ms=deadline, cancel=CancelSignal()
            )
        except JigError as exc:
            failure = exc
        if failure is None:
            evidence = result.evidence
        else:
            # A deadline is a failure on the wire that still carries the evidence.
            assert failure.code == Code.DEADLINE_EXCEEDED, failure
            assert failure.details is not None
            evidence = msgspec.convert(failure.details["command"], Evidence)
        evidence = schema_valid(evidence)
        assert evidence.cleanup == "complete"
        assert self._bun_stat() == self.bun_stat, "the Bun binary was touched"
        assert self.envelope.last is not None
        return Case(evidence, self.envelope.last, attempts(evidence.stdout.text))


@dataclass
class HostServices:
    """Listeners on the host the candidate must not reach: TCP loopback, abstract and path unix."""

    tcp: socket.socket
    abstract: socket.socket
    unix: socket.socket
    abstract_name: str
    unix_path: str

    @property
    def port(self) -> int:
        return int(self.tcp.getsockname()[1])

    def args(self) -> list[str]:
        return [str(self.port), self.abstract_name, self.unix_path]

    def connections(self) -> list[str]:
        """Which listeners have had a connection."""
        reached = []
        for name, listener in (("tcp", self.tcp), ("abstract", self.abstract), ("unix", self.unix)):
            try:
                conn, _ = listener.accept()
            except BlockingIOError:
                continue
            conn.close()
            reached.append(name)
        return reached


def refused(case: Case, name: str, *codes: str) -> None:
    """The attempt `name` was made and failed with one of `codes`."""
    attempt = case.attempts[name]
    assert not attempt.ok, attempt
    assert attempt.detail in codes, attempt
