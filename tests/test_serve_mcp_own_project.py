"""What the model reads over MCP for a person's own project: the real `jigcmd serve` child,
driven by the official MCP Python SDK, each result's structuredContent checked against its
tool's outputSchema (the part Claude Code hands the model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp_types import TextContent

from jigcmd.frontends.servechild import ServeChild
from tests.admitted_example import EXAMPLE, admit_example
from tests.mcpsession import mcp_session

pytestmark = pytest.mark.envelope

PASSING = EXAMPLE / "candidates" / "passing"
_HEAD = 'import { test, expect } from "bun:test";\n'


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    """The example, admitted in a temporary copy."""
    return admit_example(tmp_path)


def _files(changed: dict[str, str]) -> dict[str, str]:
    """The example's passing candidate, with the files of `changed` added or replaced."""
    files = {str(p.relative_to(PASSING)): p.read_text() for p in PASSING.rglob("*") if p.is_file()}
    return files | changed


async def _call(binding: Path, state: Path, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The structuredContent of one call, after checking it against the tool's outputSchema
    (its text, the same in words, under the key `text`)."""
    async with mcp_session(binding, state) as session:
        listed = await session.list_tools()
        (schema,) = [t.output_schema for t in listed.tools if t.name == tool]
        result = await session.call_tool(tool, arguments)
    view: dict[str, Any] | None = result.structured_content
    assert view is not None, result.content
    assert schema is not None
    jsonschema.Draft202012Validator(schema).validate(view)
    assert isinstance(result.content[0], TextContent)
    return view | {"text": result.content[0].text}


async def test_an_unwritten_inline_snapshot_is_a_failure_not_a_pass(
    binding: Path, tmp_path: Path
) -> None:
    """An empty `toMatchInlineSnapshot()` compares nothing, and Bun cannot write its value
    into the read-only tree: `bun test` runs in CI mode, so it fails saying so, beside an
    unrelated failure that would otherwise hide it."""
    test = (
        _HEAD
        + 'test("not yet written", () => { expect({ y: 2 }).toMatchInlineSnapshot(); });\n'
        + 'test("unrelated failure", () => { expect(1).toBe(2); });\n'
    )
    view = await _call(
        binding, tmp_path / "state", "tests", {"files": _files({"test/project.test.ts": test})}
    )
    found = {entry["name"]: entry for entry in view["tests"]["tests"]}
    assert found["not yet written"]["status"] == "failed", found
    assert "Inline snapshot creation is disabled" in found["not yet written"]["message"]
    assert view["tests"]["summary"]["failed"] == 2


async def test_the_notes_run_prints_reach_the_model_for_the_command_they_concern(
    binding: Path, tmp_path: Path
) -> None:
    """A snapshot test and a bunfig.toml preload: `tests` carries both notes in its
    structuredContent (and its words); `cli`, which runs neither, only what concerns it."""
    sent = _files(
        {
            "test/project.test.ts": _HEAD
            + 'test("v", () => expect({ v: 1 }).toMatchSnapshot());\n',
            "bunfig.toml": '[test]\npreload = ["./test/setup.ts"]\n',
            "test/setup.ts": "globalThis.ready = true;\n",
        }
    )
    view = await _call(binding, tmp_path / "state", "tests", {"files": sent})
    snapshot, bunfig = view["notes"]
    assert snapshot.startswith(
        "snapshot tests cannot pass in the envelope: test/project.test.ts (call toMatchSnapshot)."
    )
    assert bunfig.startswith("bunfig.toml: Bun runs without it")
    assert "its settings ([test] preload) do not apply" in bunfig
    assert f"\nNote: {snapshot}\nNote: {bunfig}\n" in view["text"]
    cli = await _call(binding, tmp_path / "state", "cli", {"files": sent})
    assert cli["notes"] == []


async def test_only_a_test_script_and_spawning_bun_reach_the_model_as_notes(
    binding: Path, tmp_path: Path
) -> None:
    """`test.only` fails in CI mode with Bun's "set CI=false", a `scripts.test` preload is
    never given, a `bun` spawned by name is not found: the result's `notes` name each with
    the fix, beside Bun's own failure."""
    sent = _files(
        {
            "test/project.test.ts": _HEAD
            + 'test.only("focused", () => expect(1).toBe(1));\n'
            + 'test("other", () => { Bun.spawnSync(["bun", "--version"]); });\n',
            "package.json": '{"scripts": {"test": "bun test --preload ./test/setup.ts"}}',
            "test/setup.ts": "globalThis.ready = true;\n",
        }
    )
    view = await _call(binding, tmp_path / "state", "tests", {"files": sent})
    only, script, spawn = view["notes"]
    assert only.startswith("test/project.test.ts calls .only (test.only, describe.only, it.only)")
    assert "remove .only, or give the focused tests a file and a command of their own" in only
    assert script.startswith("package.json scripts.test runs `bun test --preload ./test/setup.ts`")
    assert spawn.startswith("test/project.test.ts spawns `bun` by name")
    assert f"\nNote: {only}\nNote: {script}\nNote: {spawn}\n" in view["text"]


_FLOOD = (
    "const lines: string[] = [];\n"
    "for (let n = 0; n < 20000; n++) lines.push(`log line ${n}: processing record ok`);\n"
    'process.stdout.write(lines.join("\\n") + "\\n");\n'
    "process.stdout.write(\"FATAL: config key 'db.url' missing\\n\");\n"
    "process.exitCode = 1;\n"
)


async def test_a_truncated_stream_shows_its_real_end_and_how_much_was_written(
    binding: Path, tmp_path: Path
) -> None:
    """Past the 64 KiB kept, the model reads the stream's last bytes (the reason for exit 1)
    and the total the command wrote, the bytes neither kept nor shown counted between."""
    view = await _call(
        binding, tmp_path / "state", "cli", {"files": _files({"src/cli.ts": _FLOOD})}
    )
    stdout = view["stdout"]
    written = sum(len(f"log line {n}: processing record ok\n") for n in range(20000))
    written += len("FATAL: config key 'db.url' missing\n")
    assert (view["exitCode"], stdout["truncated"], stdout["capturedBytes"]) == (1, True, 65536)
    assert stdout["writtenBytes"] == written
    assert stdout["end"].endswith(
        "log line 19999: processing record ok\nFATAL: config key 'db.url' missing\n"
    )
    assert stdout["tail"].endswith("processing record ok\nlog line 1")  # the kept text's end
    unseen = written - 65536 - len(stdout["end"].encode())
    assert f"[… {unseen:,} bytes written past the kept 65,536, not shown …]" in view["text"]
    assert "FATAL: config key 'db.url' missing" in view["text"]


_INVALID_END = (
    'process.stdout.write("A".repeat(65536));\nprocess.stdout.write(Buffer.alloc(4096, 0xff));\n'
)


async def test_an_end_that_is_not_utf8_is_shown_and_counted_in_the_bytes_written(
    binding: Path, tmp_path: Path
) -> None:
    """4,096 invalid bytes past the cap: the end shows the last of them as written, one
    U+FFFD each (3 bytes in UTF-8), and counts the rest as not shown, never more."""
    view = await _call(
        binding, tmp_path / "state", "cli", {"files": _files({"src/cli.ts": _INVALID_END})}
    )
    stdout = view["stdout"]
    assert (stdout["capturedBytes"], stdout["writtenBytes"]) == (65536, 65536 + 4096)
    shown, unseen = len(stdout["end"]), stdout["endOmittedBytes"]
    assert stdout["end"] == "\ufffd" * shown and shown + unseen == 4096
    assert shown > 4096 // 3  # as many bytes as the view gives the end, not a third of them
    assert f"[… {unseen:,} bytes written past the kept 65,536, not shown …]" in view["text"]


_EXIT_2 = _HEAD + 'test("fails", () => expect(1).toBe(2));\ntest("exits", () => process.exit(2));\n'
_OOM = (
    _HEAD + 'test("eats memory", () => {\n  const keep: Uint8Array[] = [];\n'
    "  for (let i = 0; i < 4000; i++) keep.push(new Uint8Array(1 << 20).fill(1));\n"
    "  expect(keep.length).toBe(4000);\n});\n"
)


@pytest.mark.parametrize(
    ("test", "why"),
    [
        (_EXIT_2, "missing: the runner exited with code 2 without writing it"),
        (_OOM, "missing: the runner was killed at the envelope's memory limit before writing it"),
    ],
    ids=["exit-2", "memory"],
)
async def test_a_missing_report_says_how_the_runner_ended_without_it(
    binding: Path, tmp_path: Path, test: str, why: str
) -> None:
    """A runner that exits 2 or is killed at the memory limit writes no report: `problem`
    says so, as it says a deadline or an exit 0."""
    sent = _files({"test/project.test.ts": test})
    view = await _call(binding, tmp_path / "state", "tests", {"files": sent})
    assert view["tests"]["problem"] == why


async def test_each_tool_says_its_working_directory_is_the_root_of_files(
    binding: Path, tmp_path: Path
) -> None:
    """A package's test reading `test/fixtures/…` as under `cd packages/core && bun test`
    fails ENOENT here: the description says where relative paths start."""
    async with mcp_session(binding, tmp_path / "state") as session:
        listed = await session.list_tools()
    for tool in listed.tools:
        assert "a read-only copy of your files as the working directory (the root of `files`: " in (
            tool.description or ""
        )
    (tests,) = [tool for tool in listed.tools if tool.name == "tests"]
    assert "Bun runs in CI mode: test.only, and a snapshot it would have to write, fail." in (
        tests.description or ""
    )


async def test_a_thrown_errors_class_is_in_its_message(binding: Path, tmp_path: Path) -> None:
    """`RangeError: division by zero`, as Bun's console says it; a plain Error, a thrown
    string and an assertion keep their message alone, as there."""
    test = (
        _HEAD
        + 'test("range", () => { throw new RangeError("division by zero"); });\n'
        + 'test("plain", () => { throw new Error("plain"); });\n'
        + 'test("string", () => { throw "str"; });\n'
        + 'test("assert", () => expect(1).toBe(2));\n'
    )
    view = await _call(
        binding, tmp_path / "state", "tests", {"files": _files({"test/project.test.ts": test})}
    )
    found = {entry["name"]: entry["message"] for entry in view["tests"]["tests"]}
    assert found["range"] == "RangeError: division by zero"
    assert (found["plain"], found["string"]) == ("plain", "str")
    assert found["assert"].startswith("expect(received).toBe(expected)")


async def test_the_dependency_note_names_what_the_called_command_loads(
    binding: Path, tmp_path: Path
) -> None:
    """A declared package the entry point reaches is named; one only a file it never loads
    imports is not (its note is the command's, not the project's)."""
    sent = _files(
        {
            "package.json": '{"name": "pad", "dependencies": {"tiny-pad": "^1", "big-pad": "^1"}}',
            "src/pad.ts": 'import pad from "tiny-pad";\nexport default pad;\n',
            "src/unused.ts": 'import big from "big-pad";\nexport default big;\n',
            "src/cli.ts": 'import "./pad.ts";\n' + (PASSING / "src" / "cli.ts").read_text(),
        }
    )
    view = await _call(binding, tmp_path / "state", "cli", {"files": sent})
    (note,) = view["notes"]
    assert "1 dependency (tiny-pad: src/pad.ts) that the files of `cli` import" in note, note
    assert "big-pad" not in note


async def test_the_dependency_note_claims_no_failure_for_what_bun_test_serves(
    binding: Path, tmp_path: Path
) -> None:
    """A test importing `vitest` and `events` and mocking `pg` passes with no node_modules/:
    the model is not told those imports fail, nor to bundle the mocked `pg`."""
    test = (
        'import { test, expect, vi } from "vitest";\n'
        'import { EventEmitter } from "events";\n'
        'import { mock } from "bun:test";\n'
        'mock.module("pg", () => ({ default: { n: 42 } }));\n'
        'test("mocked", async () => {\n'
        '  const { n } = await import("../src/repo.ts");\n'
        "  expect(n).toBe(42);\n  expect(vi.fn()()).toBeUndefined();\n"
        '  expect(new EventEmitter().emit("x")).toBe(false);\n});\n'
    )
    sent = _files(
        {
            "package.json": (
                '{"name": "served", "dependencies": {"pg": "8", "events": "3"}, '
                '"devDependencies": {"vitest": "1"}}'
            ),
            "src/repo.ts": 'import pg from "pg";\nexport const n = pg.n;\n',
            "test/project.test.ts": test,
        }
    )
    view = await _call(binding, tmp_path / "state", "tests", {"files": sent})
    assert (view["exitCode"], view["tests"]["summary"]["passed"]) == (0, 1), view["text"]
    (note,) = view["notes"]
    assert note.startswith(
        "package.json declares 1 dependency (pg: src/repo.ts) that the files of `tests` import"
    ), note
    assert "pg is replaced by name in test/project.test.ts (mock.module)" in note
    assert "fail" not in note and "bun build" not in note


def test_a_keyed_retry_replays_the_streams_end_from_the_journal(
    binding: Path, tmp_path: Path
) -> None:
    """The end and the bytes written are not in the evidence: the journal keeps them beside
    it, so a retry answered by another server reads the same structuredContent."""
    args = ["--state-dir", str(tmp_path / "state"), "--run-id", "wf-flood"]
    call = {
        "name": "cli",
        "arguments": {"files": _files({"src/cli.ts": _FLOOD})},
        "_meta": {"dev.jigcmd/operationId": "act-1"},
    }
    answers = []
    for _ in range(2):
        with ServeChild(binding, args) as server:
            server.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
            answers.append(server.request("tools/call", call)["result"])
            assert server.close_input() == 0
    ran, replayed = answers
    assert ran["structuredContent"]["stdout"]["end"].endswith("'db.url' missing\n")
    assert replayed["structuredContent"] == ran["structuredContent"]
    assert replayed["content"][0] == ran["content"][0]


async def test_no_note_says_a_package_the_tests_own_tsconfig_maps_fails(
    binding: Path, tmp_path: Path
) -> None:
    """test/tsconfig.json extends a base whose `paths` maps the workspace package `@ws/core`
    to its source: Bun resolves it, the test passes, and the model is told nothing fails."""
    test = (
        _HEAD + 'import { add } from "@ws/core";\ntest("add", () => expect(add(1, 2)).toBe(3));\n'
    )
    sent = _files(
        {
            "package.json": (
                '{"name": "ws", "workspaces": ["packages/*"], '
                '"dependencies": {"@ws/core": "workspace:*"}}'
            ),
            "tsconfig.base.json": (
                '{"compilerOptions": {"paths": {"@ws/core": ["./packages/core/src/index.ts"]}}}'
            ),
            "test/tsconfig.json": '{"extends": "../tsconfig.base.json"}',
            "packages/core/package.json": '{"name": "@ws/core", "module": "src/index.ts"}',
            "packages/core/src/index.ts": "export const add = (a: number, b: number) => a + b;\n",
            "test/project.test.ts": test,
        }
    )
    view = await _call(binding, tmp_path / "state", "tests", {"files": sent})
    assert (view["exitCode"], view["tests"]["summary"]["passed"]) == (0, 1), view["text"]
    assert view["notes"] == []
