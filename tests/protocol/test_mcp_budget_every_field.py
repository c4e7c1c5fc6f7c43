"""No input pushes an MCP tool result past its budget: each field of the view that can hold
text the call or the candidate chose is cut by the one scale, down to almost nothing.

A tester's candidate wrote a JUnit report whose `encoding=` was 100,000 characters: its
parse failure quoted it into `tests.problem`, a field the scale did not cut, and the result
was 202 KB under a 24 KiB budget with both streams emptied (round 31, tester b, finding 1).
Here every such field is forged, alone and all at once, with the characters that grow most
once escaped (a tag character is 20 bytes of the words' JSON), on every protocol version.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence, ResourceReport, StreamText
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.bunconsole import Unlisted
from jigcmd.protocol.commands import OutputEnds, ResourceRef, RunResult, StreamEnd
from jigcmd.protocol.commands import TestResults as Results
from jigcmd.protocol.junit import CtrfSummary, CtrfTest
from jigcmd.protocol.junit import TestReport as Report
from jigcmd.protocol.mcp_results import completed_result, failure_result
from jigcmd.protocol.mcp_schemas import RESULT_SCHEMA
from jigcmd.protocol.mcp_versions import STRUCTURED, SUPPORTED_VERSIONS
from jigcmd.protocol.mcp_view import DEFAULT_BUDGET_BYTES, MIN_BUDGET_BYTES

REPORT = ResourceReport(
    wall_ms=1,
    setup_ms=1,
    cpu_ms=1,
    peak_memory_bytes=1,
    oom_killed=True,
    pids_limit_hit=True,
    deadline_hit=False,
)
LINKS = tuple(
    ResourceRef(f"jigcmd://run/r/o/{name}", name, "text/plain", 65_536, "sha256:" + "2" * 64, "d")
    for name in ("stdout", "stderr", "junit")
)
# What grows most once quoted or escaped: a tag character ($'\xf3\xa0\x81\x81' in the command
# line), bidi and line separators (`\u202e`), controls, JSON's own escapes, a code fence.
NASTY = ["A", "\U000e0041", "\u202e", "\u2028", "\x01", "\n", '"', "\\", "`", "\U0001f600"]
# The most in the words' JSON (a tag character, 20 bytes) and in the older eras' JSON text.
WORST = ["\U000e0041", "\u2028"]
LONG = 100_000


class Forged:
    """Each field of a run's result whose text the call or the candidate chose."""

    def __init__(self, fill: dict[str, str], tests: int = 300, report: bool = True) -> None:
        self.fill = fill
        self.tests = tests
        self.report = report

    def text(self, field: str, default: str = "ok") -> str:
        return self.fill.get(field, default)

    def result(self) -> RunResult:
        return RunResult(
            self.evidence(),
            REPORT,
            self.test_results(),
            LINKS,
            ends=OutputEnds(self.end("end"), self.end("end")),
            notes=(self.text("note"),) * 10 if "note" in self.fill else (),
        )

    def evidence(self) -> Evidence:
        return Evidence(
            candidate_digest="sha256:" + "0" * 64,
            command="tests",
            invocation=["bun", "src/cli.ts", *[self.text("argument")] * 32],
            stdin_digest="sha256:" + "1" * 64,
            stdout=StreamText(self.text("stdout"), True),
            stderr=StreamText(self.text("stderr"), True),
            exit_code=1,
            signal=None,
            stop_reason="exited",
            cleanup="complete",
        )

    def end(self, field: str) -> StreamEnd:
        tail = self.text(field)[:4096]
        return StreamEnd(dropped_bytes=10**9, tail=tail, tail_bytes=len(tail.encode()))

    def test_results(self) -> Results:
        missed = Unlisted(
            errors=10**6, files=(self.text("file"),) * 100, reason=self.text("reason")
        )
        if not self.report:
            return Results(report=None, problem=self.text("problem"), unlisted=missed)
        name = self.text("name")
        test = CtrfTest(
            name=name,
            status="failed",
            duration=1,
            filePath=self.text("file"),
            suite=[name] * 20,
            line=1,
            message=self.text("message"),
            trace="\n".join([self.text("message")] * 10),
            rawStatus="fail",
        )
        passing = msgspec.structs.replace(test, status="passed")
        tests = [test, passing] * (self.tests // 2)
        half = len(tests) // 2
        summary = CtrfSummary(
            tests=len(tests), passed=half, failed=half, skipped=0, pending=0, other=0, duration=1
        )
        return Results(report=Report(summary=summary, tests=tests), unlisted=missed)


FIELDS = [
    "argument",
    "stdout",
    "stderr",
    "end",
    "note",
    "problem",
    "reason",
    "file",
    "name",
    "message",
]


def json_size(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def checked(built: dict[str, object], version: str, budget: int) -> dict[str, Any]:
    """The result as the peer decodes it, after checking its size and, where the version
    carries it, its structuredContent against the tools' outputSchema."""
    wire: dict[str, Any] = json.loads(jsonrpc.encode_json(built))
    used = json_size(wire["content"])
    view = wire.get("structuredContent")
    if view is not None:
        used += json_size(view)
        jsonschema.Draft202012Validator(RESULT_SCHEMA).validate(view)
    assert used <= budget, (version, budget, used)
    decoded: dict[str, Any] = view or json.loads(wire["content"][1]["text"])
    assert decoded["budgetBytes"] == budget
    return decoded


# The structured era and the JSON text before it; the characters that grow most.
@pytest.mark.parametrize("version", ["2025-06-18", "2024-11-05"])
@pytest.mark.parametrize("char", WORST, ids=[f"U+{ord(c):04X}" for c in WORST])
@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("report", [True, False], ids=["report", "no-report"])
def test_each_field_forged_alone_fits_the_smallest_budget(
    version: str, char: str, field: str, report: bool
) -> None:
    """100,000 of the character in one field; the counts and digests are still said."""
    forged = Forged({field: char * LONG}, report=report)
    built = completed_result(forged.result(), version, MIN_BUDGET_BYTES)
    view = checked(built, version, MIN_BUDGET_BYTES)
    assert view["tests"]["unhandledErrors"] == 10**6
    assert view["stdout"]["writtenBytes"] == view["stdout"]["capturedBytes"] + 10**9


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
@pytest.mark.parametrize("char", WORST, ids=[f"U+{ord(c):04X}" for c in WORST])
def test_every_field_forged_at_once_fits_the_smallest_budget(version: str, char: str) -> None:
    """All of them together, in a completed result and in a stopped run's error."""
    forged = Forged(dict.fromkeys(FIELDS, char * LONG))
    built = completed_result(forged.result(), version, MIN_BUDGET_BYTES)
    checked(built, version, MIN_BUDGET_BYTES)
    error = JigError(
        Code.DEADLINE_EXCEEDED,
        "the command reached its deadline and its whole process tree was killed",
        {"command": forged.evidence()},
    )
    error.tests, error.resources = forged.test_results(), LINKS
    error.notes, error.ends = (char * LONG,) * 10, OutputEnds(forged.end("end"), forged.end("end"))
    built = failure_result(error, version, MIN_BUDGET_BYTES)
    assert built["isError"] is True
    checked(built, version, MIN_BUDGET_BYTES)


_UNITS = st.text(alphabet=st.sampled_from(NASTY), min_size=1, max_size=3)


@st.composite
def _forgeries(draw: st.DrawFn) -> Forged:
    """Some fields forged, each a unit repeated up to 100,000 times; the rest plain."""
    fill = {
        field: draw(_UNITS) * draw(st.sampled_from([1, 40, 1000, LONG]))
        for field in draw(st.sets(st.sampled_from(FIELDS), min_size=1))
    }
    return Forged(fill, tests=draw(st.sampled_from([0, 2, 300])), report=draw(st.booleans()))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    forged=_forgeries(),
    budget=st.integers(MIN_BUDGET_BYTES, 2 * DEFAULT_BUDGET_BYTES),
    version=st.sampled_from(SUPPORTED_VERSIONS),
)
def test_any_forgery_fits_any_budget(forged: Forged, budget: int, version: str) -> None:
    view = checked(completed_result(forged.result(), version, budget), version, budget)
    if version in STRUCTURED:
        assert view["limitsHit"] == ["memory", "pids"]


def test_a_plain_run_keeps_the_sentences_whole_within_the_default_budget() -> None:
    """The cut costs nothing where there is room: jigcmd's sentences are whole."""
    reason = "Bun counted 1 unhandled error between tests (test/a.test.ts), see stderr"
    forged = Forged({"reason": reason, "problem": "missing: " + "x" * 300}, report=False)
    view = checked(completed_result(forged.result()), "2025-06-18", DEFAULT_BUDGET_BYTES)
    assert view["tests"]["incomplete"] == reason
    assert view["tests"]["problem"] == "missing: " + "x" * 300
