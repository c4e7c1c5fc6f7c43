"""Candidate sources for the bundled example's `cli` command (`bun src/cli.ts ARGS…`).

Each run gets a unique token as its first argument, so the test can find the candidate's
host process by its command line and count how many times the command really ran.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LINGER", "QUICK", "SPIN", "cli_input"]

# Prints and exits after 100 ms: long enough for the witness's 10 ms scans of /proc to see
# it (pid 1 spawns it, so no process stands in its place before it runs).
QUICK = 'console.log("ran " + process.argv.slice(2).join(" "));\nsetTimeout(() => {}, 100);\n'

# Runs until it gets SIGTERM (then prints and exits 0), or until it is fenced.
LINGER = (
    'process.on("SIGTERM", () => { console.log("ended " + process.argv[2]); process.exit(0); });\n'
    'console.log("started " + process.argv[2]);\n'
    "setInterval(() => {}, 1000);\n"
)

# Burns CPU until it is killed.
SPIN = 'console.log("spinning " + process.argv[2]);\nfor (;;) {}\n'


def cli_input(source: str, token: str, *extra: str) -> dict[str, Any]:
    """The `input` of a `cli` call running `source` with `token` (and `extra`) as arguments."""
    return {"command": "cli", "files": {"src/cli.ts": source}, "args": [token, *extra]}
