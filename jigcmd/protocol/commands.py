"""What the wire knows about commands: the catalog it advertises and the result of one run."""

from __future__ import annotations

from typing import Literal

import msgspec

from jigcmd.errors import JigError
from jigcmd.evidence import Evidence, ResourceReport

__all__ = ["CommandKind", "Recorded", "RunResult", "ToolInfo"]

CommandKind = Literal["run", "test"]


class ToolInfo(msgspec.Struct, frozen=True):
    """One command the Binding configures; `unavailable` says why calls to it cannot run now."""

    name: str
    kind: CommandKind
    # None when the command is admitted; otherwise a reason a person can act on, e.g.
    # "the policy is not admitted; run `jigcmd lock --binding …`".
    unavailable: str | None = None
    # The candidate paths it runs: the test files (`bun test …`) or the entry point (`bun …`).
    paths: tuple[str, ...] = ()

    @property
    def command_line(self) -> str:
        """What it runs, as a person would type it: `bun test a.test.ts`, `bun src/cli.ts ARGS…`."""
        if self.kind == "test":
            return " ".join(("bun", "test", *self.paths))
        return " ".join(("bun", *self.paths[:1], "ARGS…"))


class RunResult(msgspec.Struct, frozen=True):
    """A completed run: the contract's evidence, and what lives beside it, never in it.

    `attestation`: the run's signed statement (an in-toto bundle of DSSE envelopes, JSON
    Lines), when the host signs; delivered beside the evidence by the fronts that carry it.
    """

    evidence: Evidence
    report: ResourceReport
    attestation: bytes | None = None


class Recorded(msgspec.Struct, frozen=True):
    """What the journal holds of one operation: open (running somewhere) or how it ended."""

    open: bool
    created_unix_ms: int
    updated_unix_ms: int
    # The recorded end (a result, or the failure a replay raises); None while open.
    outcome: RunResult | JigError | None = None
