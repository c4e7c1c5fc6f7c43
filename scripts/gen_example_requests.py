"""Write (or with --check, verify) the bundled example's request files from its candidates.

`jigcmd/example/requests/` holds what the README pipes into `jigcmd serve`: a FLOW Run/1 call
(`flow.jsonl`) and an MCP session (`mcp.jsonl`), each carrying a candidate's files inline,
and the stdin text for the `cli` command (`stdin.txt`). A test fails when they are stale.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "jigcmd" / "example"
REQUESTS = EXAMPLE / "requests"
STDIN = "a\nb\n"
CLI_ARGS = ["--greeting", "hi"]


def candidate(name: str) -> dict[str, str]:
    """A bundled candidate's files by relative path, as `jigcmd run --files` reads them."""
    root = EXAMPLE / "candidates" / name
    return {
        path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _lines(messages: list[dict[str, object]]) -> bytes:
    return "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages).encode()


def generate() -> dict[str, bytes]:
    """Every request file by name."""
    flow: dict[str, object] = {
        "jsonrpc": "2.0",
        "id": "example-1",
        "method": "capability/call",
        "params": {
            "operationId": "example-passing-tests",
            "slot": "command",
            "method": "run",
            "input": {"command": "tests", "files": candidate("passing")},
        },
    }
    mcp: list[dict[str, object]] = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "jigcmd-readme", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        # Three calls at once: an MCP session runs them side by side (each in its own envelope).
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "tests", "arguments": {"files": candidate("passing")}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "tests", "arguments": {"files": candidate("failing")}},
        },
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {
                "name": "cli",
                "arguments": {"files": candidate("passing"), "args": CLI_ARGS, "stdin": STDIN},
            },
        },
    ]
    return {
        "flow.jsonl": _lines([flow]),
        "mcp.jsonl": _lines(mcp),
        "stdin.txt": STDIN.encode(),
    }


def stale_files(directory: Path = REQUESTS) -> list[str]:
    """Names of request files that are missing or differ from the generator."""
    return [
        name
        for name, content in generate().items()
        if not (directory / name).is_file() or (directory / name).read_bytes() != content
    ]


def main(argv: list[str] | None = None) -> int:
    """Generate the request files, or report stale ones with --check (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a request file is stale")
    options = parser.parse_args(argv)
    if options.check:
        stale = stale_files()
        for name in stale:
            print(f"stale: {REQUESTS / name} (run {Path(__file__).name})", file=sys.stderr)
        return 1 if stale else 0
    REQUESTS.mkdir(exist_ok=True)
    for name, content in generate().items():
        (REQUESTS / name).write_bytes(content)
    return 0


if __name__ == "__main__":
    sys.exit(main())
