"""`config_files` and `Aliases` on an `extends` that names a file again, or loops: each
config is read once a walk. Run in a child bounded by `timeout=` (pytest has none), as the
unbounded walk would take hours."""

from __future__ import annotations

import json
import subprocess
import sys

_PROGRAM = """
import json, sys
from jigcmd.policy.tsconfigpaths import Aliases, config_files
files = json.loads(sys.argv[1])
targets = Aliases(files).targets("a.ts", "x")
print(json.dumps([sorted(config_files(files)), getattr(targets, "why", targets)]))
"""


def _run(files: dict[str, str]) -> list[object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM, json.dumps(files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found: list[object] = json.loads(done.stdout)
    return found


def test_a_config_extending_itself_thrice_returns() -> None:
    files = {"tsconfig.json": json.dumps({"extends": ["./tsconfig.json"] * 3}), "a.ts": ""}
    assert _run(files) == [["tsconfig.json"], []]


def test_a_loop_of_two_keeps_the_first_setting_met() -> None:
    """a extends [b, b, b], b extends a and sets baseUrl: b's baseUrl is read, once."""
    files = {
        "tsconfig.json": json.dumps({"extends": ["./b.json"] * 3}),
        "b.json": json.dumps(
            {"extends": ["./tsconfig.json"] * 3, "compilerOptions": {"baseUrl": "src"}}
        ),
        "a.ts": "",
    }
    assert _run(files) == [["b.json", "tsconfig.json"], ["src/x"]]


def test_a_chain_wider_than_the_cap_is_unknown() -> None:
    """A config extending 80 others: the walk stops at 64 files, saying so."""
    files = {f"c{n}.json": "{}" for n in range(80)}
    files["tsconfig.json"] = json.dumps({"extends": [f"./c{n}.json" for n in range(80)]})
    files["a.ts"] = ""
    found = _run(files)
    assert found[1] == "c16.json is past the 64 files a chain of `extends` may hold", found
    assert isinstance(found[0], list) and len(found[0]) == 64, found
