"""What the wire knows about commands: the catalog it advertises and the result of one run."""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from jigcmd.errors import JigError
from jigcmd.evidence import Evidence, ResourceReport
from jigcmd.protocol.bunconsole import Unlisted, command_files, unlisted
from jigcmd.protocol.junit import TestReport, UnreadableReport, parse_junit

__all__ = [
    "CommandKind",
    "OutputEnds",
    "Recorded",
    "ResourceRef",
    "RunResult",
    "StreamEnd",
    "TestResults",
    "ToolInfo",
]

CommandKind = Literal["run", "test"]

# How a run that its runner did not end was stopped, said of a report there all the same.
_STOPPED: Final = {
    "deadline": "the run was stopped at its deadline",
    "cancelled": "the run was cancelled",
}


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


class TestResults(msgspec.Struct, frozen=True):
    """A test command's per-test results from the runner's report, or why there are none.

    Candidate-influenced: the runner ran candidate code, which can alter the report. `problem`
    says why `report` is None (missing, too large, unparseable); nothing is ever invented.
    `unlisted`: the failures of a failed run that the report leaves out (Bun's JUnit report
    has no file that failed to load), from the runner's console.
    """

    report: TestReport | None
    problem: str = ""
    # The report's bytes as read (also when unparseable), for `resources/read`.
    raw: bytes | None = None
    unlisted: Unlisted = Unlisted()
    # The end of stderr when it passed its cap, where Bun's footer is ("" when it did not):
    # kept so that the journal's record reads the same (`jigcmd.durable.replay`).
    stderr_tail: str = ""

    @classmethod
    def read(
        cls,
        data: bytes | None,
        problem: str = "",
        *,
        evidence: Evidence | None = None,
        stderr_tail: str = "",
        oom_killed: bool = False,
    ) -> TestResults:
        """The results in a report's bytes (None: there are none, and `problem` says why).

        With the run's `evidence` (and `stderr_tail`, the end of its stderr past the cap),
        also what the report leaves out of a failed run; `oom_killed`: the resource report's
        word that the kernel's OOM killer killed a process of the run.
        """
        if data is None:
            results = cls(report=None, problem=problem)
        else:
            try:
                results = cls(report=parse_junit(data), raw=data)
            except UnreadableReport as exc:
                results = cls(report=None, problem=f"unreadable: {exc}", raw=data)
        if evidence is None:
            return results
        listed = None if results.report is None else results.report.summary.failed
        missed = unlisted(
            evidence.stderr.text,
            evidence.exit_code,
            listed,
            stderr_tail,
            test_files=command_files(evidence.invocation),
            listed_names=_failed_names(results.report),
        )
        if results.report is not None and evidence.exit_code is None:
            unfinished = _unfinished(evidence, oom_killed)
            why = "; ".join(part for part in (missed.reason, unfinished) if part)
            missed = msgspec.structs.replace(missed, reason=why)
        return msgspec.structs.replace(results, unlisted=missed, stderr_tail=stderr_tail)


def _failed_names(report: TestReport | None) -> list[str] | None:
    """The failed tests a report lists, `describe > name` as Bun's console prints them."""
    if report is None:
        return None
    return [
        " > ".join([*(test.suite or []), test.name])
        for test in report.tests
        if test.status == "failed"
    ]


def _unfinished(evidence: Evidence, oom_killed: bool) -> str:
    """Why a report read after a runner that never exited is not its own: Bun writes it only
    as it ends, so one there after a signal or a stop is the candidate's (one written just
    before a stop is said so too: nothing tells the two apart)."""
    how = _STOPPED.get(evidence.stop_reason, f"the runner was killed by {evidence.signal}")
    if evidence.stop_reason not in _STOPPED and oom_killed and evidence.signal == "SIGKILL":
        # In the words a missing report's problem uses for the same end (command/outcomes.py).
        how = "the runner was killed at the envelope's memory limit"
    return (
        f"{how}, yet a JUnit report is there, which Bun writes only as it ends: the report is "
        "not a finished runner's (the candidate's code can write one); see stderr"
    )


class ResourceRef(msgspec.Struct, frozen=True):
    """One per-run resource kept after the call (a stream, the JUnit report, …)."""

    uri: str
    name: str
    mime_type: str
    size: int
    sha256: str
    description: str = ""


class StreamEnd(msgspec.Struct, frozen=True, rename="camel"):
    """What one stream carried past the evidence's cap, which the evidence never holds: how
    many bytes, and the last of them (at most 4 KiB, where a runner's footer is)."""

    dropped_bytes: int = 0
    # The stream's end after the kept text: all of what was dropped when that is at most
    # `tail_bytes`, else its last `tail_bytes` (UTF-8 with replacement, cut where it starts).
    tail: str = ""
    tail_bytes: int = 0


class OutputEnds(msgspec.Struct, frozen=True):
    """Each stream's end past the cap, beside the evidence (`jigcmd run`, MCP; journaled)."""

    stdout: StreamEnd = msgspec.field(default_factory=StreamEnd)
    stderr: StreamEnd = msgspec.field(default_factory=StreamEnd)


class RunResult(msgspec.Struct, frozen=True):
    """A completed run: the contract's evidence, and what lives beside it, never in it.

    `tests` and `resources` are for the fronts that asked for them (MCP, `jigcmd run --json`);
    Run/1 answers with the evidence alone. `attestation`: the run's signed statement (an
    in-toto bundle of DSSE envelopes, JSON Lines), when the host signs; delivered beside the
    evidence by the fronts that carry it. `ended_unix_ms`: when its journal row says it
    ended (None without one), what an MCP task's `lastUpdatedAt` says live and replayed.
    """

    evidence: Evidence
    report: ResourceReport
    tests: TestResults | None = None
    resources: tuple[ResourceRef, ...] = ()
    attestation: bytes | None = None
    ended_unix_ms: int | None = None
    # Each stream past the cap: the journal keeps it beside the evidence (`durable.replay`),
    # so a replay has it too, unless an older jigcmd recorded the run.
    ends: OutputEnds | None = None
    # What Bun under jigcmd will not do with the files sent, for this command
    # (`jigcmd.command.callnotes`): for the fronts a model reads (MCP).
    notes: tuple[str, ...] = ()


class Recorded(msgspec.Struct, frozen=True):
    """What the journal holds of one operation: open (running somewhere) or how it ended."""

    open: bool
    created_unix_ms: int
    updated_unix_ms: int
    # The recorded end (a result, or the failure a replay raises); None while open.
    outcome: RunResult | JigError | None = None
