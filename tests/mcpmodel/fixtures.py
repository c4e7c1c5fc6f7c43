"""What the model-facing MCP tests serve: the example with a three-file test suite, admitted.

`suite` runs three test files that between them hold nested `describe`s, `test.each`, a
skipped and a todo test, a thrown error, an assertion failure and a timeout; `EXPECTED`
is exactly what the result's `tests` must say about them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.admitted_example import EXAMPLE
from tests.required import require_root

__all__ = ["EXPECTED_FAILING", "EXPECTED_OTHERS", "EXPECTED_SUMMARY", "SUITE_FILES", "admit"]

SUITE_PATHS = ("test/a.test.ts", "test/b.test.ts", "test/c.test.ts")

SUITE_FILES: dict[str, str] = {
    "test/a.test.ts": """import { describe, expect, test } from "bun:test";

describe("math", () => {
  describe("adding", () => {
    test("one and one", () => {
      expect(1 + 1).toBe(2);
    });
    test("is wrong here", () => {
      expect(1 + 1).toBe(3);
    });
  });
  test.each([
    [1, 2],
    [2, 3],
  ])("increments %i", (a, b) => {
    expect(a + 1).toBe(b);
  });
});
""",
    "test/b.test.ts": """import { expect, test } from "bun:test";

test.skip("not today", () => {
  expect(true).toBe(false);
});
test.todo("write this one");
test("throws", () => {
  throw new Error("boom & <bang>");
});
""",
    "test/c.test.ts": """import { expect, test } from "bun:test";

test("quick", () => {
  expect("a").toBe("a");
});
test(
  "too slow",
  async () => {
    await Bun.sleep(2000);
  },
  100,
);
""",
}

EXPECTED_SUMMARY = {"tests": 9, "passed": 4, "failed": 3, "skipped": 1, "pending": 1, "other": 0}

# Failing tests first, in the report's order; durations are not compared.
EXPECTED_FAILING: list[dict[str, Any]] = [
    {
        "name": "is wrong here",
        "status": "failed",
        "filePath": "test/a.test.ts",
        "suite": ["math", "adding"],
        "line": 8,
        "message": "expect(received).toBe(expected)\n\nExpected: 3\nReceived: 2",
        "trace": "at test/a.test.ts:9:21",
        "rawStatus": "fail",
    },
    {
        "name": "throws",
        "status": "failed",
        "filePath": "test/b.test.ts",
        "line": 7,
        "message": "boom & <bang>",
        "trace": "at test/b.test.ts:8:34",
        "rawStatus": "fail",
    },
    {
        "name": "too slow",
        "status": "failed",
        "filePath": "test/c.test.ts",
        "line": 7,
        "message": "test timed out",
        "rawStatus": "timeout",
    },
]
# Then the others (skipped and todo), then the passing ones.
EXPECTED_OTHERS: list[dict[str, Any]] = [
    {
        "name": "not today",
        "status": "skipped",
        "filePath": "test/b.test.ts",
        "line": 3,
        "rawStatus": "skip",
    },
    {
        "name": "write this one",
        "status": "pending",
        "filePath": "test/b.test.ts",
        "line": 6,
        "rawStatus": "todo",
    },
    {
        "name": "one and one",
        "status": "passed",
        "filePath": "test/a.test.ts",
        "suite": ["math", "adding"],
        "line": 5,
        "rawStatus": "pass",
    },
    {
        "name": "increments 1",
        "status": "passed",
        "filePath": "test/a.test.ts",
        "suite": ["math"],
        "line": 15,
        "rawStatus": "pass",
    },
    {
        "name": "increments 2",
        "status": "passed",
        "filePath": "test/a.test.ts",
        "suite": ["math"],
        "line": 15,
        "rawStatus": "pass",
    },
    {
        "name": "quick",
        "status": "passed",
        "filePath": "test/c.test.ts",
        "line": 3,
        "rawStatus": "pass",
    },
]


def admit(tmp_path: Path) -> Path:
    """A copy of the example with the `suite` command added, locked; its Binding's path."""
    require_root()
    copy = Path(shutil.copytree(EXAMPLE, tmp_path / "example"))
    binding = copy / "binding.toml"
    listed = ", ".join(f'"{path}"' for path in SUITE_PATHS)
    binding.write_text(binding.read_text() + f"suite = {{ test = [{listed}] }}\n")
    subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--binding", str(binding)],
        check=True,
        capture_output=True,
    )
    return binding
