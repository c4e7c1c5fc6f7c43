"""A FLOW Run/1 call's signed test result names each test exactly and unambiguously.

A tester's CSV parser tested with `test.each` over multi-line strings had each name cut at
its first line break in a Run/1 call's statement (read from Bun's console lines), and a
failing `describe("a > b") > "c"` beside a passing `describe("a") > describe("b") > "c"`
put `a > b > c` in both lists. Driven as a caller does: `jigcmd serve` answers the call,
`jigcmd attest` fetches its statement, securesystemslib checks the signature with the key
`jigcmd key` prints, and `jigcmd verify` checks it against the answer; `jigcmd run --json`
and an MCP call (the official SDK) sign the very same names.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

from jigcmd.attest.testnames import JUNIT_NAMES, split
from tests.admitted_example import jigcmd_cli
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig
from tests.mcpsession import mcp_session

pytestmark = pytest.mark.envelope

# The example's `tests` command runs test/project.test.ts.
FILE = "test/project.test.ts"
SOURCE = r"""import { test, expect, describe } from "bun:test";
test.each([["a,b\nc,d", 2], ["1,2\n3,4\n", 3]])("rows(%s) has %i rows", (input, n) => {
  expect(input.split("\n").filter(Boolean)).toHaveLength(n);
});
describe("a > b", () => { test("c", () => { expect(1).toBe(2); }); });
describe("a", () => { describe("b", () => { test("c", () => { expect(1).toBe(1); }); }); });
"""
# Each test's path (file, describe blocks, name) as the source wrote it.
PASSED = [[FILE, "rows(a,b\nc,d) has 2 rows"], [FILE, "a", "b", "c"]]
FAILED = [[FILE, "rows(1,2\n3,4\n) has 3 rows"], [FILE, "a > b", "c"]]


def _signed_tests(bundle: bytes, state_dir: Path) -> dict[str, Any]:
    """The test-result predicate, every envelope's signature checked by securesystemslib
    with the key `jigcmd key` prints."""
    printed = jigcmd_cli("key", "--state-dir", str(state_dir))
    assert printed.returncode == 0, printed.stderr
    public = serialization.load_pem_public_key(printed.stdout.encode())
    statements = []
    for line in bundle.decode().splitlines():
        envelope = Envelope.from_dict(json.loads(line))
        keyid = envelope.signatures[next(iter(envelope.signatures))].keyid
        envelope.verify([SSlibKey.from_crypto(public, keyid=keyid)], 1)
        statements.append(json.loads(base64.b64decode(json.loads(line)["payload"])))
    (tests,) = [s for s in statements if s["predicateType"].endswith("/test-result/v0.1")]
    predicate: dict[str, Any] = tests["predicate"]
    return predicate


def _assert_exact_names(predicate: dict[str, Any]) -> None:
    assert predicate["result"] == "FAILED"
    assert [split(name) for name in predicate["passedTests"]] == PASSED
    assert [split(name) for name in predicate["failedTests"]] == FAILED
    # No name is in both lists, and the plain ones read as Bun's console shows them.
    assert not set(predicate["passedTests"]) & set(predicate["failedTests"])
    assert predicate["passedTests"][1] == f"{FILE} > a > b > c"
    assert predicate["failedTests"][1] == f"{FILE} > a \\> b > c"
    (report,) = [c for c in predicate["configuration"] if c["name"].startswith("test runner")]
    assert report["name"] == "test runner report (bun test JUnit report)"
    assert report["annotations"]["testNames"] == JUNIT_NAMES


def test_a_run1_calls_statement_names_multi_line_and_nested_tests_exactly(
    rig: Rig, tmp_path: Path
) -> None:
    """Each name whole, line breaks and all; `a > b` apart from `a`, `b`; verify agrees."""
    server = rig.serve()
    server.send(flow_call("c1", "op-names", {"command": "tests", "files": {FILE: SOURCE}}))
    answer = server.answer("c1")
    assert server.close_input() == 0
    assert answer["result"]["value"]["exitCode"] == 1, answer
    bundle = tmp_path / "bundle.jsonl"
    state = ("--state-dir", str(rig.state_dir))
    fetched = jigcmd_cli("attest", "--run-id", rig.run_id, "op-names", *state, "--out", str(bundle))
    assert fetched.returncode == 0, fetched.stderr
    _assert_exact_names(_signed_tests(bundle.read_bytes(), rig.state_dir))
    (tmp_path / "answer.json").write_text(json.dumps(answer))
    checked = jigcmd_cli(
        "verify", str(bundle), *state, "--evidence", str(tmp_path / "answer.json"),
        "--run-id", rig.run_id, "--operation-id", "op-names",
        "--lock", str(rig.binding.parent / "jigcmd.lock"),
    )  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "ok   test result: FAILED: 2 passed, 2 failed" in checked.stdout
    assert checked.stdout.endswith("\nverified\n")


def test_run_json_signs_the_very_same_names(rig: Rig, tmp_path: Path) -> None:
    """`jigcmd run --json` (which shows per-test results) signs them as a Run/1 call does."""
    candidate = tmp_path / "candidate"
    (candidate / "test").mkdir(parents=True)
    (candidate / FILE).write_text(SOURCE)
    done = jigcmd_cli(
        "run", "--binding", str(rig.binding), "--state-dir", str(rig.state_dir),
        "tests", "--files", str(candidate), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    bundle = json.loads(done.stdout)["attestation"]["bundle"].encode()
    _assert_exact_names(_signed_tests(bundle, rig.state_dir))


async def test_an_mcp_call_signs_the_very_same_names(rig: Rig, tmp_path: Path) -> None:
    """An MCP `tools/call` (the official SDK): its statement, fetched by the ids its `_meta`
    names, names the tests as a Run/1 call's does."""
    async with mcp_session(rig.binding, rig.state_dir) as session:
        result = await session.call_tool("tests", {"files": {FILE: SOURCE}})
    assert result.is_error is False and result.meta is not None
    named = result.meta["jigcmd/attestation"]
    bundle = tmp_path / "bundle.jsonl"
    fetched = jigcmd_cli(
        "attest", "--run-id", named["runId"], named["operationId"],
        "--state-dir", str(rig.state_dir), "--out", str(bundle),
    )  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr
    _assert_exact_names(_signed_tests(bundle.read_bytes(), rig.state_dir))


def _run1_predicate(rig: Rig, tmp_path: Path, operation_id: str, source: str) -> dict[str, Any]:
    """The signed test-result predicate of one Run/1 call of the example's `tests`."""
    server = rig.serve()
    server.send(flow_call("c1", operation_id, {"command": "tests", "files": {FILE: source}}))
    server.answer("c1")
    assert server.close_input() == 0
    bundle = tmp_path / f"{operation_id}.jsonl"
    state = ("--state-dir", str(rig.state_dir))
    fetched = jigcmd_cli(
        "attest", "--run-id", rig.run_id, operation_id, *state, "--out", str(bundle)
    )
    assert fetched.returncode == 0, fetched.stderr
    return _signed_tests(bundle.read_bytes(), rig.state_dir)


def test_a_failure_after_two_thousand_skipped_tests_is_named(rig: Rig, tmp_path: Path) -> None:
    """The cap on names counts passed and failed tests, not the skipped ones before them."""
    source = (
        'import { test, expect, describe } from "bun:test";\n'
        'describe.skip("off", () => { test.each([...Array(2000).keys()])("row %i", () => {}); });\n'
        'test("the one that matters", () => { expect(1 + 1).toBe(3); });\n'
        'test("also runs", () => { expect(1).toBe(1); });\n'
    )
    predicate = _run1_predicate(rig, tmp_path, "op-skips", source)
    assert predicate["result"] == "FAILED"
    assert predicate["failedTests"] == [f"{FILE} > the one that matters"]
    assert predicate["passedTests"] == [f"{FILE} > also runs"]


def test_a_report_the_candidate_wrote_before_exit_0_is_not_a_pass(rig: Rig, tmp_path: Path) -> None:
    """A test writes its own JUnit report and exits 0 before Bun's summary: the statement
    says the run is incomplete (WARNED), as the console's path always did, not PASSED."""
    forged = (
        '<?xml version="1.0" encoding="UTF-8"?><testsuites name="bun test" tests="1">'
        '<testsuite name="t" file="test/project.test.ts" tests="1">'
        '<testcase name="forged" classname="t" time="0" file="test/project.test.ts"/>'
        "</testsuite></testsuites>"
    )
    source = (
        'import { test } from "bun:test";\nimport { writeFileSync } from "node:fs";\n'
        f'test("writes", () => {{ writeFileSync("/tmp/jigcmd-junit.xml", {json.dumps(forged)}); '
        "process.exit(0); });\n"
    )
    predicate = _run1_predicate(rig, tmp_path, "op-forged", source)
    assert predicate["result"] == "WARNED", predicate
    (report,) = [c for c in predicate["configuration"] if c["name"].startswith("test runner")]
    assert "does not end with its" in report["annotations"]["incomplete"], report
