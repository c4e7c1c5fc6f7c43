"""The test names Bun's runner reported: from its JUnit report, or from its console output.

The JUnit report is the one the plan had Bun write (parsed by `jigcmd.protocol.junit`).
Without one, `bun test` prints `(pass) describe > name [0.02ms]` and `(fail) …` per test on
stderr, under a `file.test.ts:` line per file. Either way the candidate's code ran in the
runner and can alter what it reports: these names are the runner's word, never the host's
(see `TestReport`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection

from jigcmd.attest.statement import TestReport
from jigcmd.protocol.bunconsole import UNHANDLED_NAME, Unlisted, has_footer, unlisted
from jigcmd.protocol.commands import TestResults

__all__ = ["read_console_report", "read_junit_report"]

_RESULT = re.compile(r"^\((pass|fail)\) (.+?)(?: \[[0-9.]+m?s\])?$")
_FILE = re.compile(r"^([^\s()][^:]*):$")
# Bounds on what is kept from output the candidate controls.
_MAX_TESTS = 2000
_MAX_NAME = 512
_FOOTER_WORDS = "`Ran N tests across M files.`"


def read_console_report(
    stderr: str,
    exit_code: int | None,
    tail: str = "",
    missing: str = "",
    *,
    test_files: Collection[str] = (),
) -> TestReport:
    """Passed and failed test names (`file > describe > name`) from bun test's stderr.

    Of a run that exited `exit_code`: a failed one's unhandled errors between tests are
    named among the failed (`file > (unhandled error between tests)`), as Bun counts them
    (its footer read from `tail`, the end of stderr, when stderr passed its cap). After an
    exit 0 the report is incomplete when the JUnit report the plan asked for is not there
    (`missing`: why, as `TestResults.problem` says it) or the console has no footer.
    `test_files`: the files the command runs, the only names its reason quotes
    (`bunconsole.command_files`).
    """
    passed: list[str] = []
    failed: list[str] = []
    file = ""
    for line in stderr.splitlines():
        header = _FILE.match(line)
        if header is not None:
            file = header.group(1)
            continue
        result = _RESULT.match(line)
        if result is None or len(passed) + len(failed) >= _MAX_TESTS:
            continue
        name = f"{file} > {result.group(2)}" if file else result.group(2)
        (passed if result.group(1) == "pass" else failed).append(name[:_MAX_NAME])
    missed = unlisted(stderr, exit_code, len(failed), tail, test_files=test_files)
    ended = _ended_early(stderr, exit_code, tail, missing)
    return TestReport(
        passed=tuple(passed),
        failed=(*failed, *_unhandled(missed, len(passed) + len(failed))),
        source="bun test console output (stderr)",
        source_sha256=hashlib.sha256(stderr.encode("utf-8")).hexdigest(),
        incomplete="; ".join(reason for reason in (ended, missed.reason) if reason),
    )


def _ended_early(stderr: str, exit_code: int | None, tail: str, missing: str) -> str:
    """Why an exit 0 says nothing of the tests (a report or the footer missing); "" if not."""
    if exit_code != 0:
        return ""
    if missing:
        return f"the runner's JUnit report is {missing}"
    if has_footer(stderr, tail):
        return ""
    return (
        f"the runner's console does not end with its {_FOOTER_WORDS} line: it ended before "
        "its summary, so exit code 0 does not mean the tests passed"
    )


def read_junit_report(results: TestResults) -> TestReport | None:
    """Passed and failed test names (`file > describe > name`) from the parsed JUnit report."""
    if results.report is None or results.raw is None:
        return None
    passed: list[str] = []
    failed: list[str] = []
    for test in results.report.tests[:_MAX_TESTS]:
        if test.status not in ("passed", "failed"):
            continue
        path = [test.filePath] if test.filePath else []
        name = " > ".join([*path, *(test.suite or []), test.name])[:_MAX_NAME]
        (passed if test.status == "passed" else failed).append(name)
    missed = results.unlisted
    return TestReport(
        passed=tuple(passed),
        failed=(*failed, *_unhandled(missed, len(passed) + len(failed))),
        source="bun test JUnit report",
        source_sha256=hashlib.sha256(results.raw).hexdigest(),
        incomplete=missed.reason,
    )


def _unhandled(missed: Unlisted, named: int) -> list[str]:
    """A failed "test" per unhandled error, after its file when the console names one."""
    room = max(0, _MAX_TESTS - named)
    return [
        f"{file} > {UNHANDLED_NAME}"[:_MAX_NAME] if file else UNHANDLED_NAME
        for file in missed.files[:room]
    ]
