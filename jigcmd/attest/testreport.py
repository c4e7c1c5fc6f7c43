"""The test names Bun's runner reported: from its JUnit report, or from its console output.

The JUnit report is the one the plan had Bun write for every test command (parsed by
`jigcmd.protocol.junit`): each test's file, describe path and name come apart, and are
joined as `jigcmd.attest.testnames` says, so that a ` > ` of a name is never the separator
(Bun's writer drops control characters, which no name can then tell apart). Without one (a run
stopped or ended before Bun wrote it, the statement signed before the release was proved),
`bun test` prints `(pass) describe > name [0.02ms]` and `(fail) …` per test on stderr, under
a `file.test.ts:` line per file: a multi-line name is cut at its first line there, and a
describe named "a > b" reads as two, as the statement's `testNames` says. Either way the
candidate's code ran in the runner and can alter what it reports: these names are the
runner's word, never the host's (see `TestReport`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection

from jigcmd.attest.statement import TestReport
from jigcmd.attest.testnames import CONSOLE_NAMES, JUNIT_NAMES, SEPARATOR, joined
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
        (passed if result.group(1) == "pass" else failed).append(_cut(name))
    missed = unlisted(stderr, exit_code, len(failed), tail, test_files=test_files)
    ended = _ended_early(stderr, exit_code, tail, missing)
    return TestReport(
        passed=tuple(passed),
        failed=(*failed, *_unhandled(missed, len(passed) + len(failed), SEPARATOR.join)),
        source="bun test console output (stderr)",
        source_sha256=hashlib.sha256(stderr.encode("utf-8")).hexdigest(),
        incomplete="; ".join(reason for reason in (ended, missed.reason) if reason),
        names=CONSOLE_NAMES,
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


def read_junit_report(
    results: TestResults, stderr: str = "", exit_code: int | None = None, tail: str = ""
) -> TestReport | None:
    """Passed and failed test names (`file > describe > name`, each part escaped as
    `testnames.joined` says) from the parsed JUnit report.

    The first `_MAX_TESTS` passed or failed tests are named, whatever skipped or todo tests
    come before them. After an exit 0 (`exit_code`, the console's `stderr` and its `tail`)
    the console must end with Bun's summary as on the console's path: a report the
    candidate wrote itself before `process.exit(0)` is not a finished run's.
    """
    if results.report is None or results.raw is None:
        return None
    passed: list[str] = []
    failed: list[str] = []
    for test in results.report.tests:
        if test.status not in ("passed", "failed"):
            continue
        if len(passed) + len(failed) >= _MAX_TESTS:
            break
        path = [test.filePath] if test.filePath else []
        name = _cut(joined([*path, *(test.suite or []), test.name]))
        (passed if test.status == "passed" else failed).append(name)
    missed = results.unlisted
    ended = _ended_early(stderr, exit_code, tail, "")
    return TestReport(
        passed=tuple(passed),
        failed=(*failed, *_unhandled(missed, len(passed) + len(failed), joined)),
        source="bun test JUnit report",
        source_sha256=hashlib.sha256(results.raw).hexdigest(),
        incomplete="; ".join(reason for reason in (ended, missed.reason) if reason),
        names=JUNIT_NAMES,
    )


def _cut(name: str) -> str:
    """`name`, or its first `_MAX_NAME - 1` characters and "…": a cut name says it was cut."""
    return name if len(name) <= _MAX_NAME else name[: _MAX_NAME - 1] + "…"


def _unhandled(missed: Unlisted, named: int, join: Callable[[list[str]], str]) -> list[str]:
    """A failed "test" per unhandled error, after its file when the console names one."""
    room = max(0, _MAX_TESTS - named)
    return [
        _cut(join([file, UNHANDLED_NAME])) if file else UNHANDLED_NAME
        for file in missed.files[:room]
    ]
