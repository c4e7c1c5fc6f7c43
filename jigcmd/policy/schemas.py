"""Wire types without a home elsewhere, and the JSON Schemas generated from all wire types.

`scripts/gen_schemas.py` writes `generate()` to `schemas/`; a test fails when they differ.
Limits in these schemas are the documented ones; jigcmd counts string limits in UTF-8
bytes (`jigcmd.policy.request`), which is stricter than JSON Schema's code points.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import msgspec

from jigcmd.evidence import Evidence
from jigcmd.policy.binding import PolicyDocument
from jigcmd.policy.lock import Lock
from jigcmd.policy.paths import LOCAL_NAME_PATTERN, PATH_MAX_BYTES, PATH_PATTERN
from jigcmd.policy.request import (
    MAX_ARG_BYTES,
    MAX_ARGS,
    MAX_CANDIDATE_BYTES,
    MAX_FILES,
    MAX_STDIN_BYTES,
)

__all__ = ["OPERATION_ID_PATTERN", "CallParams", "RequestInput", "generate"]

OPERATION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_LocalName = Annotated[str, msgspec.Meta(pattern=LOCAL_NAME_PATTERN, max_length=64)]
_Path = Annotated[str, msgspec.Meta(pattern=PATH_PATTERN, max_length=PATH_MAX_BYTES)]


class RequestInput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The `run` method input: a command name and the exact candidate files."""

    command: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    files: Annotated[
        dict[_Path, str],
        msgspec.Meta(
            min_length=1,
            max_length=MAX_FILES,
            description=f"At most {MAX_CANDIDATE_BYTES:,} UTF-8 bytes of text in total.",
        ),
    ]
    args: Annotated[
        list[Annotated[str, msgspec.Meta(max_length=MAX_ARG_BYTES)]],
        msgspec.Meta(max_length=MAX_ARGS, description="Each at most 1,024 UTF-8 bytes, no NUL."),
    ] = []
    stdin: Annotated[
        str, msgspec.Meta(max_length=MAX_STDIN_BYTES, description="At most 16,384 UTF-8 bytes.")
    ] = ""


class CallParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """Params of a FLOW Run/1 `capability/call` (or `effect/call`).

    `input` is left undecoded here: request validation checks it rule by rule, in order.
    """

    operation_id: Annotated[
        str, msgspec.Meta(pattern=OPERATION_ID_PATTERN, min_length=1, max_length=128)
    ]
    slot: _LocalName
    method: _LocalName
    input: Annotated[Any, msgspec.Meta(extra_json_schema={"$ref": "#/$defs/RequestInput"})]
    channels: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    deadline_unix_ms: (
        Annotated[
            int,
            msgspec.Meta(
                ge=0,
                le=2**53 - 1,
                description="jigcmd extension: the caller's remaining deadline.",
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET


# File name, root type, extra types whose definitions the root refers to by hand.
_DOCUMENTS: tuple[tuple[str, type[msgspec.Struct], tuple[type[msgspec.Struct], ...]], ...] = (
    ("binding.schema.json", PolicyDocument, ()),
    ("lock.schema.json", Lock, ()),
    ("run-input.schema.json", RequestInput, ()),
    ("run-call-params.schema.json", CallParams, (RequestInput,)),
    ("evidence.schema.json", Evidence, ()),
)


def generate() -> dict[str, bytes]:
    """Every schema file's exact bytes, keyed by file name."""
    documents: dict[str, bytes] = {}
    for name, root, extras in _DOCUMENTS:
        (root_schema, *_), definitions = msgspec.json.schema_components((root, *extras))
        document = {"$schema": SCHEMA_DIALECT, **root_schema, "$defs": definitions}
        text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
        documents[name] = text.encode("utf-8")
    return documents
