"""What `jigcmd serve` tells a call with a progress token when output is cut or cleans to nothing.

Driven in raw frames on the real MCP serve child with the reviewer's two candidates. Console
noise past stdout's 64 KiB cap once froze the `(pass)` count that Bun prints on stderr; and
a colour reset on its own line after the real last line once made the message fall back to
"running".
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from jigcmd.frontends.servechild import ServeChild
from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope

# 8 tests, one printing ~190 KiB to stdout, 20 more, then one holding the run for 3 s so the
# count of all the others is told while it waits (its own `(pass)` comes at the end).
NOISY = (
    'import { test } from "bun:test";\n'
    'import { writeSync } from "node:fs";\n'
    "for (let i = 0; i < 8; i++) test(`a${i}`, async () => { await Bun.sleep(100); });\n"
    'test("noisy", () => {\n'
    '  writeSync(1, ("debug " + "d".repeat(90) + "\\n").repeat(2000));\n'
    "});\n"
    "for (let i = 0; i < 20; i++) test(`t${i}`, async () => { await Bun.sleep(100); });\n"
    'test("last", async () => { await Bun.sleep(3000); });\n'
)
NOISY_PASSED_BEFORE_LAST = 8 + 1 + 20
STALE = (
    'import { writeSync } from "node:fs";\n'
    'writeSync(1, "compiling step 7 of 9\\n");\n'
    'writeSync(1, "\\x1b[0m\\n");\n'
    "await Bun.sleep(2000);\n"
)
ANSWER_S = 120.0
COUNT = re.compile(r"its console printed (\d+) '\(pass\)' and (\d+) '\(fail\)' lines (.*)")


def _told(binding: Path, state: Path, command: str, files: dict[str, str]) -> list[str]:
    """The progress messages a `command` call with a token was told before its result."""
    with ServeChild(binding, ["--state-dir", str(state)], timeout=ANSWER_S) as server:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}}
        assert "result" in server.request("initialize", hello)
        server.notify("notifications/initialized", None)
        params: dict[str, Any] = {
            "name": command,
            "arguments": {"files": files},
            "_meta": {"progressToken": "live"},
        }
        server.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
        answer = server.answer(7)
        assert server.close_input() == 0
    assert answer["result"]["isError"] is False, answer["result"]["content"]
    return [
        message["params"]["message"]
        for message in map(json.loads, server.lines)
        if message.get("method") == "notifications/progress"
    ]


def test_noise_past_stdout_s_cap_leaves_the_stderr_count_going(tmp_path: Path) -> None:
    binding = admit_example(tmp_path)
    told = _told(binding, tmp_path / "state", "tests", {"test/project.test.ts": NOISY})
    counts = [match.groups() for match in map(COUNT.fullmatch, told) if match]
    assert counts, told
    cut = [(int(passed), int(failed)) for passed, failed, when in counts if "cut" in when]
    assert cut, told
    # Counted on past the noise: every test but the one holding the run had passed by then.
    assert max(passed for passed, _f in cut) >= NOISY_PASSED_BEFORE_LAST, told
    # Every count after the noise names the stream it no longer counts.
    assert all(
        when == "so far, not counting stdout past where it was cut (not a verified count)"
        for _p, _f, when in counts
        if "cut" in when
    ), told
    assert all(failed == 0 for _p, failed in cut), told


def test_a_line_that_cleans_to_nothing_leaves_the_line_before_it_told(tmp_path: Path) -> None:
    binding = admit_example(tmp_path)
    told = _told(binding, tmp_path / "state", "cli", {"src/cli.ts": STALE})
    line = "output: compiling step 7 of 9"
    assert line in told, told
    # Once told, the line stands: the colour reset after it never brings back "running".
    assert "running" not in told[told.index(line) :], told
