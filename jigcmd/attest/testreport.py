"""The test names Bun's runner reported, read from the output the candidate's code shares.

`bun test` prints `(pass) describe > name [0.02ms]` and `(fail) …` per test on stderr, under
a `file.test.ts:` line per file. Whatever the candidate prints can look the same: these
names are the runner's word, never the host's (see `TestReport`).
"""

from __future__ import annotations

import hashlib
import re

from jigcmd.attest.statement import TestReport

__all__ = ["read_console_report"]

_RESULT = re.compile(r"^\((pass|fail)\) (.+?)(?: \[[0-9.]+m?s\])?$")
_FILE = re.compile(r"^([^\s()][^:]*):$")
# Bounds on what is kept from output the candidate controls.
_MAX_TESTS = 2000
_MAX_NAME = 512


def read_console_report(stderr: str) -> TestReport:
    """Passed and failed test names (`file > describe > name`) from bun test's stderr."""
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
    return TestReport(
        passed=tuple(passed),
        failed=tuple(failed),
        source="bun test console output (stderr)",
        source_sha256=hashlib.sha256(stderr.encode("utf-8")).hexdigest(),
    )
