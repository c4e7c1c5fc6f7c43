"""What a model reads counts what it leaves out in a structure of its own and words its units.

Through `jigcmd serve` and the MCP Python SDK (which holds each structured result to its
tool's outputSchema, as a host does): the words of the command line left out are a count
beside `invocation`, never an item of it; a count of one is singular; and where a stream is
not UTF-8, the words say that `omittedBytes` counts its text, not the bytes written.
`jigcmd verify --evidence` holds each such answer to the run's signed statement.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp_types import TextContent

from tests.admitted_example import admit_example
from tests.mcpsession import mcp_session as client
from tests.mcpverify import verify_result, verify_run

pytestmark = pytest.mark.envelope

EXIT_1 = {"src/cli.ts": "process.exit(1);\n"}


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    return admit_example(tmp_path)


def _words(result: Any) -> str:
    first = result.content[0]
    assert isinstance(first, TextContent)
    return first.text


def _whole(result: Any) -> dict[str, Any]:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[no-any-return]


def _made(directory: Path) -> Path:
    directory.mkdir(exist_ok=True)
    return directory


def _verified(state: Path, tmp: Path, result: Any) -> list[str]:
    _made(tmp)
    whole = _whole(result)
    return verify_result(state, tmp, whole, {"jsonrpc": "2.0", "id": 2, "result": whole})


async def test_the_arguments_left_out_are_a_count_beside_the_array(
    binding: Path, tmp_path: Path
) -> None:
    """Thirteen arguments: the array holds `bun`, the script and ten of them, all real;
    `invocationOmitted` says 3; an argument shaped like the old marker is just an argument."""
    state = tmp_path / "state"
    many = [str(n) for n in range(13)]
    async with client(binding, state) as session:
        cut = await session.call_tool("cli", {"files": EXIT_1, "args": many})
        shaped = await session.call_tool("cli", {"files": EXIT_1, "args": ["… 3 more arguments"]})
    view = cut.structured_content
    assert view is not None
    assert view["invocation"] == ["bun", "src/cli.ts", *many[:10]]
    assert view["invocationOmitted"] == 3
    assert _words(cut).startswith("`bun src/cli.ts 0 1 2 3 4 5 6 7 8 9 … 3 more arguments` ")
    assert _verified(state, tmp_path, cut)[-1] == "verified"
    # As an older jigcmd answered: its count the array's last item, no `invocationOmitted`.
    older = _whole(cut)
    view = older["structuredContent"]
    view["invocation"].append(f"… {view.pop('invocationOmitted')} more arguments")
    answer = {"jsonrpc": "2.0", "id": 2, "result": older}
    lines = verify_result(state, _made(tmp_path / "older"), older, answer)
    assert lines[-1] == "verified", lines
    same = shaped.structured_content
    assert same is not None
    assert same["invocation"] == ["bun", "src/cli.ts", "… 3 more arguments"]
    assert same["invocationOmitted"] == 0
    assert _verified(state, tmp_path / "shaped", shaped)[-1] == "verified"


async def test_one_of_anything_left_out_is_said_in_the_singular(
    binding: Path, tmp_path: Path
) -> None:
    """One argument past the twelve words, one byte past the kept end and one byte of stdout:
    `1 more argument`, `1 byte written past …`, `(1 byte, …`, never `1 bytes`."""
    state = tmp_path / "state"
    # 65,536 kept, then the 4 KiB end the host keeps, then one byte more before it.
    flood = {"src/cli.ts": 'process.stdout.write("a".repeat(69633 - 4) + "END\\n");\n'}
    one = {"src/cli.ts": 'process.stdout.write("x");\n'}
    async with client(binding, state) as session:
        eleven = await session.call_tool(
            "cli", {"files": EXIT_1, "args": [str(n) for n in range(11)]}
        )
        past = await session.call_tool("cli", {"files": flood})
        single = await session.call_tool("cli", {"files": one})
    assert "… 1 more argument` exited" in _words(eleven)
    assert "[… 1 byte written past the kept 65,536, not shown …]" in _words(past)
    assert "stdout (1 byte, sha256:" in _words(single)
    for result in (eleven, past, single):
        assert " 1 bytes " not in _words(result) and "1 more arguments" not in _words(result)
    assert _verified(state, tmp_path, past)[-1] == "verified"


async def test_the_omitted_count_of_a_stream_that_is_not_utf8_says_it_counts_text(
    binding: Path, tmp_path: Path
) -> None:
    """70,000 bytes that are not UTF-8: each kept one is 3 bytes of text, so `omittedBytes`
    exceeds the bytes captured; the words say the count is of the text and how long it is."""
    state = tmp_path / "state"
    source = (
        "process.stdout.write(Buffer.alloc(70000, 0xe2));"
        "process.stdout.write(Buffer.from([0xff, 0xfe, 0x41, 0xe2, 0x82]));\n"
    )
    async with client(binding, state) as session:
        ran = await session.call_tool("cli", {"files": {"src/cli.ts": source}})
    view = ran.structured_content
    assert view is not None
    stdout = view["stdout"]
    assert stdout["capturedBytes"] == 65_536 and stdout["omittedBytes"] > 65_536
    text = 3 * 65_536
    lines = _words(ran).split("\n")
    header = next(line for line in lines if line.startswith("stdout ("))
    assert f"as text {text:,} bytes of UTF-8" in header, header
    assert "the count omitted is of the text" in header
    assert f"[… {stdout['omittedBytes']:,} bytes of the text omitted …]" in lines
    assert _verified(state, tmp_path, ran)[-1] == "verified"


async def test_a_command_of_several_test_files_says_every_file_they_import(
    tmp_path: Path,
) -> None:
    """`tools/list`: "they import" after two files, "it imports" after one, in the tool's
    description and its `files` argument's alike (round 32, tester mcp, finding 5)."""
    binding = admit_example(tmp_path, 'two = { test = ["test/a.test.ts", "test/b.test.ts"] }\n')
    async with client(binding, tmp_path / "state") as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    two, one = tools["two"], tools["tests"]
    assert "`test/a.test.ts` and `test/b.test.ts` and every file they import:" in (
        two.description or ""
    )
    files = two.input_schema["properties"]["files"]["description"]
    assert files.endswith("needs `test/a.test.ts`, `test/b.test.ts`, and every file they import.")
    assert "`test/project.test.ts` and every file it imports:" in (one.description or "")
    files = one.input_schema["properties"]["files"]["description"]
    assert files.endswith("needs `test/project.test.ts`, and every file it imports.")


async def test_structured_content_alone_reconciles_a_stream_that_is_not_utf8(
    binding: Path, tmp_path: Path
) -> None:
    """`textBytes` is what head, `omittedBytes` and tail add up to, beside `capturedBytes`,
    and the outputSchema says why they differ (round 32, tester mcp, finding 3); `jigcmd
    verify` holds it to that sum."""
    state = tmp_path / "state"
    source = (
        "process.stdout.write(Buffer.from([0xff, 0xfe, 0x00, 0x41, 0xe2, 0x82, 0x0a]));"
        'process.stdout.write("x".repeat(200000) + "\\n");\n'
    )
    async with client(binding, state) as session:
        listed = await session.list_tools()
        ran = await session.call_tool("cli", {"files": {"src/cli.ts": source}})
    (schema,) = [tool.output_schema for tool in listed.tools if tool.name == "cli"]
    assert schema is not None
    described = schema["properties"]["stdout"]["properties"]["textBytes"]["description"]
    assert "head, omittedBytes and tail add up to" in described
    view = ran.structured_content
    assert view is not None
    stdout = view["stdout"]
    parts = len((stdout["head"] + stdout["tail"]).encode()) + stdout["omittedBytes"]
    assert stdout["capturedBytes"] == 65_536
    # 0xff, 0xfe and the cut 0xe2 0x82 are 3 bytes of text each: 65,536 + 2 + 2 + 1.
    assert stdout["textBytes"] == parts == 65_541
    assert _verified(state, tmp_path / "a", ran)[-1] == "verified"
    assert ran.structured_content is not None
    ran.structured_content["stdout"]["textBytes"] = 65_536
    assert _verified(state, tmp_path / "b", ran)[-1] != "verified"
    # An integer or absent (an older jigcmd's result), never null (round 32, rev3, finding 2).
    ran.structured_content["stdout"]["textBytes"] = None
    _made(tmp_path / "c")
    whole = _whole(ran)
    refused = verify_run(state, tmp_path / "c", whole, {"jsonrpc": "2.0", "id": 2, "result": whole})
    assert refused.returncode == 2, refused.stdout
    assert "not an MCP structuredContent: textBytes is null, not an integer" in refused.stderr
