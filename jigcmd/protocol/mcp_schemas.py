"""The JSON Schemas MCP clients see for a tool, generated from the contract's Structs.

msgspec writes the schema; this module reshapes it to what MCP hosts have always been sent:
definitions inlined, no titles or defaults, nullable types as a `type` list, a one-value
enum as `const`, enums in declaration order, and keys in one fixed order. The tool input
is the `run` input without `command` (the tool name selects the command), and leaves the
path grammar (`propertyNames`) to request validation, whose refusal names the rule.
"""

from __future__ import annotations

import typing
from typing import Any, Final

import msgspec

from jigcmd.contract import RequestInput
from jigcmd.evidence import Evidence

__all__ = ["ARGUMENTS_SCHEMA", "EVIDENCE_SCHEMA"]

# Where each key goes in an emitted schema; the order MCP clients have always been sent.
_KEY_ORDER: Final = (
    "type",
    "description",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "minProperties",
    "maxProperties",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "enum",
    "const",
)
# msgspec's words for people reading the contract's own schemas; MCP tools carry their own.
_DROPPED: Final = frozenset({"title", "description", "default", "propertyNames"})


def _reshape(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """One msgspec schema node, reshaped and with every `$ref` inlined."""
    if "$ref" in schema:
        return _reshape(definitions[schema["$ref"].rsplit("/", 1)[1]], definitions)
    node = {key: value for key, value in schema.items() if key not in _DROPPED}
    members = node.pop("anyOf", None)
    if members is not None:
        # Only nullable scalars are unions in these Structs: `T | None` is `type: [T, null]`.
        node["type"] = [member["type"] for member in members]
    if "enum" in node and len(node["enum"]) == 1:
        node["const"] = node.pop("enum")[0]
    if "properties" in node:
        node["properties"] = {
            name: _reshape(value, definitions) for name, value in node["properties"].items()
        }
    for key in ("items", "additionalProperties"):
        if type(node.get(key)) is dict:
            node[key] = _reshape(node[key], definitions)
    unknown = node.keys() - set(_KEY_ORDER)
    assert not unknown, f"no place for {sorted(unknown)} in an MCP schema"
    return {key: node[key] for key in _KEY_ORDER if key in node}


def _declared_enums(struct: type[msgspec.Struct], schema: dict[str, Any]) -> None:
    """Put each Literal field's enum back in declaration order (msgspec sorts it)."""
    hints = typing.get_type_hints(struct)
    for field in msgspec.structs.fields(struct):
        prop = schema["properties"][field.encode_name]
        if "enum" in prop:
            prop["enum"] = list(typing.get_args(hints[field.name]))


def _struct_schema(struct: type[msgspec.Struct]) -> dict[str, Any]:
    (root,), definitions = msgspec.json.schema_components((struct,))
    schema = _reshape(root, definitions)
    _declared_enums(struct, schema)
    return schema


def _evidence_schema() -> dict[str, Any]:
    """The evidence as a tool's `outputSchema`."""
    schema = _struct_schema(Evidence)
    # Every field is on the wire, defaults too (the Struct does not omit defaults), so a
    # client may rely on each: all ten are required.
    schema["required"] = list(schema["properties"])
    return schema


def _arguments_schema() -> dict[str, Any]:
    """A tool's `inputSchema` before its words: the `run` input without `command`."""
    schema = _struct_schema(RequestInput)
    del schema["properties"]["command"]
    schema["required"].remove("command")
    return schema


EVIDENCE_SCHEMA: Final = _evidence_schema()
ARGUMENTS_SCHEMA: Final = _arguments_schema()
