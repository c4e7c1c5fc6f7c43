"""Every MCP tool result fits its budget, on every version, whatever the run printed or named.

Worst cases the wire allows: both streams at their 64 KiB cap of multi-byte (and JSON-escaped)
text or of backticks (the text's code fences grow with them), the largest invocation, a
report of thousands of failing tests with long names, messages and traces. The counts,
digests and links are never cut; heads, tails and lists are.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jigcmd.errors import Code, JigError
from jigcmd.evidence import Evidence, ResourceReport, StreamText
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.commands import OutputEnds, ResourceRef, RunResult, StreamEnd
from jigcmd.protocol.commands import TestResults as Results
from jigcmd.protocol.junit import CtrfSummary, CtrfTest
from jigcmd.protocol.junit import TestReport as Report
from jigcmd.protocol.mcp_results import completed_result, failure_result
from jigcmd.protocol.mcp_versions import SUPPORTED_VERSIONS
from jigcmd.protocol.mcp_view import (
    DEFAULT_BUDGET_BYTES,
    LISTED_TESTS_MAX,
    MIN_BUDGET_BYTES,
    full_tests,
)

REPORT = ResourceReport(
    wall_ms=1,
    setup_ms=1,
    cpu_ms=1,
    peak_memory_bytes=1,
    oom_killed=False,
    pids_limit_hit=False,
    deadline_hit=False,
)
CAP = 65_536


def evidence(stdout: str, stderr: str = "", args: int = 0) -> Evidence:
    return Evidence(
        candidate_digest="sha256:" + "0" * 64,
        command="cli",
        invocation=["bun", "src/cli.ts", *(['\u00e9"\\' * 341] * args)],
        stdin_digest="sha256:" + "1" * 64,
        stdout=StreamText(stdout, True),
        stderr=StreamText(stderr, False),
        exit_code=1,
        signal=None,
        stop_reason="exited",
        cleanup="complete",
    )


def wire(result: dict[str, object]) -> dict[str, Any]:
    """The result as the peer decodes it."""
    return json.loads(jsonrpc.encode_json(result))  # type: ignore[no-any-return]


def size(result: dict[str, Any]) -> int:
    total = len(json.dumps(result["content"], separators=(",", ":"), ensure_ascii=False).encode())
    if "structuredContent" in result:
        total += len(
            json.dumps(
                result["structuredContent"], separators=(",", ":"), ensure_ascii=False
            ).encode()
        )
    return total


def failing_report(count: int, text: str) -> Results:
    tests = [
        CtrfTest(
            name=text * 3,
            status="failed",
            duration=1,
            filePath=text,
            suite=[text] * 20,
            line=i,
            message=text * 10,
            trace="\n".join(f"at {text}:{i}" for i in range(50)),
            rawStatus="fail",
        )
        for i in range(count)
    ]
    summary = CtrfSummary(
        tests=count, passed=0, failed=count, skipped=0, pending=0, other=0, duration=1
    )
    return Results(report=Report(summary=summary, tests=tests))


LINKS = tuple(
    ResourceRef(f"jigcmd://run/r/o/{name}", name, "text/plain", CAP, "sha256:" + "2" * 64, "d")
    for name in ("stdout", "stderr", "junit")
)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
@pytest.mark.parametrize("budget", [MIN_BUDGET_BYTES, 8192, DEFAULT_BUDGET_BYTES])
@pytest.mark.parametrize(
    "text",
    ["o", "\u00e9", "\U0001f600", '"', "\\", "\x01", "<", "`"],
    ids=["ascii", "two-byte", "four-byte", "quote", "backslash", "control", "angle", "backtick"],
)
def test_the_worst_case_fits_on_every_version(version: str, budget: int, text: str) -> None:
    stream = (text * CAP)[: CAP // len(text.encode())]
    # Each stream's end past the cap (4 KiB kept) and the most notes, each long, count too.
    end = StreamEnd(dropped_bytes=5_000_000, tail=stream[: 4096 // len(text.encode())],
                    tail_bytes=4096)  # fmt: skip
    result = RunResult(
        evidence(stream, stream, args=32),
        REPORT,
        failing_report(3000, text * 40),
        LINKS,
        ends=OutputEnds(end, end),
        notes=(text * 3000,) * 10,
    )
    built = wire(completed_result(result, version, budget))
    assert size(built) <= budget
    view = built.get("structuredContent") or json.loads(built["content"][1]["text"])
    # Never cut: the counts and the digest of the whole stream.
    assert view["tests"]["summary"]["failed"] == 3000
    assert view["stdout"]["sha256"] == "sha256:" + hashlib.sha256(stream.encode()).hexdigest()
    assert view["stdout"]["capturedBytes"] == len(stream.encode())
    shown = len(view["tests"].get("tests", []))
    assert view["tests"].get("truncated", 0) == 3000 - shown


def test_a_short_run_is_shown_whole_with_nothing_omitted() -> None:
    built = wire(completed_result(RunResult(evidence("hello\n"), REPORT)))
    view = built["structuredContent"]
    assert (view["stdout"]["head"], view["stdout"]["tail"], view["stdout"]["omittedBytes"]) == (
        "hello\n",
        "",
        0,
    )
    assert view["tests"] is None and view["budgetBytes"] == DEFAULT_BUDGET_BYTES


def test_before_2025_06_18_the_text_is_the_view_never_the_evidence() -> None:
    built = wire(completed_result(RunResult(evidence("x" * CAP), REPORT), "2025-03-26"))
    _words, view = built["content"]
    assert "structuredContent" not in built
    decoded = json.loads(view["text"])
    assert "text" not in decoded["stdout"] and decoded["stdout"]["omittedBytes"] > 0


def test_a_failure_with_evidence_is_budgeted_too() -> None:
    error = JigError(
        Code.DEADLINE_EXCEEDED, "ran past its deadline", {"command": evidence("y" * CAP)}
    )
    for version in SUPPORTED_VERSIONS:
        built = wire(failure_result(error, version, MIN_BUDGET_BYTES))
        assert built["isError"] is True and size(built) <= MIN_BUDGET_BYTES


@settings(max_examples=60, deadline=None)
@given(
    stdout=st.text(max_size=3000),
    names=st.lists(st.text(min_size=1, max_size=300), max_size=40),
    budget=st.integers(MIN_BUDGET_BYTES, 3 * DEFAULT_BUDGET_BYTES),
    version=st.sampled_from(SUPPORTED_VERSIONS),
)
def test_any_output_and_any_test_names_fit(
    stdout: str, names: list[str], budget: int, version: str
) -> None:
    tests = [
        CtrfTest(name=name, status="failed" if i % 2 else "passed", duration=0, message=name)
        for i, name in enumerate(names)
    ]
    summary = CtrfSummary(
        tests=len(tests),
        passed=len(tests) - len(tests) // 2,
        failed=len(tests) // 2,
        skipped=0,
        pending=0,
        other=0,
        duration=0,
    )
    result = RunResult(evidence(stdout * 30), REPORT, Results(Report(summary, tests)), LINKS)
    assert size(wire(completed_result(result, version, budget))) <= budget


def test_within_the_default_budget_a_chatty_failing_run_still_shows_plenty() -> None:
    """The budget is spent, not hoarded: heads, tails and failing tests are all there."""
    result = RunResult(evidence("o" * CAP, "e" * CAP), REPORT, failing_report(40, "x" * 30), LINKS)
    built = wire(completed_result(result, budget=DEFAULT_BUDGET_BYTES))
    view = built["structuredContent"]
    assert size(built) > DEFAULT_BUDGET_BYTES * 0.9
    for name in ("stdout", "stderr"):
        assert len(view[name]["head"]) >= 1024 and len(view[name]["tail"]) >= 1024
    assert len(view["tests"]["tests"]) >= 3


def mixed_report(failing: int, name: str) -> Results:
    """`failing` failing tests named `name`…, then five todo, a skipped and five passing ones."""
    statuses = ["failed"] * failing + ["pending"] * 5 + ["skipped"] + ["passed"] * 5
    tests = [
        CtrfTest(
            name=f"{status} {i} {name}",
            status=status,  # type: ignore[arg-type]
            duration=1,
            filePath="test/a.test.ts",
            line=i,
            message="expected 1, got 2" if status == "failed" else None,
        )
        for i, status in enumerate(statuses)
    ]
    summary = CtrfSummary(
        tests=len(tests), passed=5, failed=failing, skipped=1, pending=5, other=0, duration=1
    )
    return Results(report=Report(summary=summary, tests=tests))


@pytest.mark.parametrize("version", ["2025-06-18", "2024-11-05"])
@pytest.mark.parametrize("budget", [MIN_BUDGET_BYTES, 8192, DEFAULT_BUDGET_BYTES])
@pytest.mark.parametrize(
    ("failing", "name"), [(40, "n" * 3000), (300, "n" * 50)], ids=["long-names", "many"]
)
def test_failing_tests_are_the_last_to_go_under_the_budget(
    version: str, budget: int, failing: int, name: str
) -> None:
    """Cut to fit, the list keeps failing tests before any todo, skipped or passing one."""
    result = RunResult(evidence("o"), REPORT, mixed_report(failing, name), LINKS)
    built = wire(completed_result(result, version, budget))
    assert size(built) <= budget
    view = built.get("structuredContent") or json.loads(built["content"][1]["text"])
    statuses = [test["status"] for test in view["tests"]["tests"]]
    assert statuses and set(statuses) == {"failed"}
    assert view["tests"]["truncated"] == failing + 11 - len(statuses)


def test_a_list_that_fits_is_failing_then_skipped_and_todo_then_passing() -> None:
    result = RunResult(evidence("o"), REPORT, mixed_report(3, "short"), LINKS)
    view = wire(completed_result(result))["structuredContent"]
    statuses = [test["status"] for test in view["tests"]["tests"]]
    assert statuses == ["failed"] * 3 + ["pending"] * 5 + ["skipped"] + ["passed"] * 5


def test_the_run_json_listing_stops_at_its_cap_and_counts_what_it_left_out() -> None:
    """`jigcmd run --json` has no budget: the listing has a cap, failing tests first."""
    passing = [CtrfTest(name=f"p{i}", status="passed", duration=0) for i in range(LISTED_TESTS_MAX)]
    failing = [CtrfTest(name="f", status="failed", duration=0)] * 3
    summary = CtrfSummary(
        tests=len(passing) + 3,
        passed=len(passing),
        failed=3,
        skipped=0,
        pending=0,
        other=0,
        duration=0,
    )
    listed = full_tests(Results(report=Report(summary=summary, tests=passing + failing)))
    assert len(listed.tests) == LISTED_TESTS_MAX and listed.truncated == 3
    assert [test.status for test in listed.tests[:3]] == ["failed"] * 3
