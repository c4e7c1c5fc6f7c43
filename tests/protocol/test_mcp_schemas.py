"""MCP's tool schemas are generated from the contract's Structs and state the descriptor."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jigcmd.protocol.commands import ToolInfo
from jigcmd.protocol.mcp_schemas import EVIDENCE_SCHEMA, RESULT_SCHEMA
from jigcmd.protocol.mcp_tools import input_schema, tools_list_json

DESCRIPTOR = Path(__file__).parents[2] / "schemas" / "project-command.capability.json"
# The server counts UTF-8 bytes where `maxLength` counts characters: the words say so.
BYTES = "sizes are UTF-8 bytes, not characters: a character outside ASCII takes 2-4"


def definition(name: str) -> dict[str, Any]:
    return json.loads(DESCRIPTOR.read_bytes())["$defs"][name]  # type: ignore[no-any-return]


def text(value: object) -> str:
    """JSON text that keeps key order, so two schemas compare as a client reads them."""
    return json.dumps(value, ensure_ascii=False)


def test_the_output_schema_is_the_descriptors_result_key_for_key_in_order() -> None:
    """The evidence Struct generates exactly the descriptor's `Result`, in its order."""
    assert text(EVIDENCE_SCHEMA) == text(definition("Result"))


def test_every_tool_lists_the_budgeted_result_schema() -> None:
    """tools/list carries the budgeted result's schema as every tool's `outputSchema`."""
    tools = [ToolInfo("tests", "test", None, ("a.test.ts",)), ToolInfo("cli", "run")]
    listed = json.loads(tools_list_json(tools))["tools"]
    assert [text(tool["outputSchema"]) for tool in listed] == [text(RESULT_SCHEMA)] * 2


def test_the_budgeted_schema_keeps_the_descriptors_words_for_what_it_shares() -> None:
    """How the command ended and the digests are stated exactly as the descriptor's Result."""
    result = definition("Result")["properties"]
    shared = ("command", "exitCode", "signal", "stopReason", "cleanup")
    for name in (*shared, "candidateDigest", "stdinDigest"):
        assert RESULT_SCHEMA["properties"][name] == result[name], name
    assert RESULT_SCHEMA["required"] == list(RESULT_SCHEMA["properties"])


def test_the_input_schema_states_the_descriptors_bounds_without_command() -> None:
    """Each argument has the descriptor's `Input` bounds; `command` is the tool's name."""
    contract = definition("Input")
    schema = input_schema("run")
    assert schema["required"] == [name for name in contract["required"] if name != "command"]
    assert schema["additionalProperties"] is contract["additionalProperties"] is False
    assert list(schema["properties"]) == [
        name for name in contract["properties"] if name != "command"
    ]
    for name, generated in schema["properties"].items():
        bounds = {key: value for key, value in generated.items() if key != "description"}
        expected = dict(contract["properties"][name])
        if name == "files":
            # Request rule 2 (1-64 files), which the descriptor leaves to the prose.
            expected["minProperties"] = 1
        assert bounds == expected, name


def test_the_input_schema_on_the_wire_is_what_clients_were_always_sent() -> None:
    """Generated, the schema a client reads is the hand-written one's, byte for byte."""
    files: dict[str, Any] = {
        "type": "object",
        "description": "The candidate project: 1-64 relative paths mapped to their UTF-8 text "
        f"(at most 262,144 bytes in total; {BYTES}). The command's own files must be included. "
        "This command needs `src/cli.ts`, and every file it imports.",
        "additionalProperties": {"type": "string", "maxLength": 262144},
        "minProperties": 1,
        "maxProperties": 64,
    }
    args = {
        "type": "array",
        "description": "Arguments passed verbatim to the script (never Bun options), each at "
        f"most 1,024 bytes ({BYTES}).",
        "items": {"type": "string", "maxLength": 1024},
        "maxItems": 32,
    }
    stdin = {
        "type": "string",
        "description": f"Text supplied on standard input (at most 16,384 bytes; {BYTES}).",
        "maxLength": 16384,
    }
    wrapper = {"type": "object", "required": ["files"], "additionalProperties": False}

    def expected(properties: dict[str, Any]) -> str:
        return text({"type": "object", "properties": properties, **wrapper})

    assert text(input_schema("run", ("src/cli.ts",))) == expected(
        {"files": files, "args": args, "stdin": stdin}
    )
    first_sentences = files["description"].split(" This command")[0]
    assert text(input_schema("test")) == expected(
        {"files": files | {"description": first_sentences}, "stdin": stdin}
    )
