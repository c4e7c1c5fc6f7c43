"""The project-command contract as jigcmd implements it: identity, limits, request Structs.

Every other module takes these from here: request validation enforces the limits, the
generated schemas and MCP's tool schemas state them, and the lock records the identity.
String limits are counted in UTF-8 bytes by request validation, which is stricter than the
code points JSON Schema counts.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

import msgspec

__all__ = [
    "CONTRACT_DIGEST",
    "CONTRACT_ID",
    "CONTRACT_VERSION",
    "DIGEST_CHARS",
    "INPUT_KEYS",
    "LOCAL_NAME_MAX_CHARS",
    "LOCAL_NAME_PATTERN",
    "MAX_ARGS",
    "MAX_ARG_BYTES",
    "MAX_CANDIDATE_BYTES",
    "MAX_FILES",
    "MAX_STDIN_BYTES",
    "OPERATION_ID_MAX_BYTES",
    "OPERATION_ID_PATTERN",
    "OUTPUT_CAP_BYTES",
    "PATH_MAX_BYTES",
    "PATH_PATTERN",
    "RUN_METHOD",
    "CallParams",
    "RequestInput",
]

# The identity of the one capability contract jigcmd implements (spec-notes §1).
CONTRACT_ID: Final = "https://jig.md/contracts/project-command"
CONTRACT_VERSION: Final = "1.0.0"
CONTRACT_DIGEST: Final = "sha256:aed62fe17f01897545f82d7ee91f163a023721431433c8f4f6981b4367c85bcf"
# The capability's only method (the descriptor's `methods`).
RUN_METHOD: Final = "run"

# The `run` input (spec-notes §4).
INPUT_KEYS: Final = ("command", "files", "args", "stdin")
MAX_FILES: Final = 64
MAX_CANDIDATE_BYTES: Final = 262_144
MAX_ARGS: Final = 32
MAX_ARG_BYTES: Final = 1_024
MAX_STDIN_BYTES: Final = 16_384
# Each output stream keeps this many bytes (the evidence's `stdout.text`/`stderr.text`).
OUTPUT_CAP_BYTES: Final = 65_536
# A digest in the evidence: "sha256:" and 64 lowercase hex digits.
DIGEST_CHARS: Final = 71

# Candidate paths (spec-notes §3) and LocalNames (slots, methods, command names).
PATH_PATTERN: Final = r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$"
PATH_MAX_BYTES: Final = 256
LOCAL_NAME_PATTERN: Final = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
LOCAL_NAME_MAX_CHARS: Final = 64
# Run/1 request and operation ids.
OPERATION_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"
OPERATION_ID_MAX_BYTES: Final = 128

_LocalName = Annotated[
    str, msgspec.Meta(pattern=LOCAL_NAME_PATTERN, max_length=LOCAL_NAME_MAX_CHARS)
]
_Path = Annotated[str, msgspec.Meta(pattern=PATH_PATTERN, max_length=PATH_MAX_BYTES)]


class RequestInput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The `run` method input: a command name and the exact candidate files."""

    command: Annotated[str, msgspec.Meta(min_length=1, max_length=LOCAL_NAME_MAX_CHARS)]
    files: Annotated[
        dict[_Path, Annotated[str, msgspec.Meta(max_length=MAX_CANDIDATE_BYTES)]],
        msgspec.Meta(
            min_length=1,
            max_length=MAX_FILES,
            description=f"At most {MAX_CANDIDATE_BYTES:,} UTF-8 bytes of text in total.",
        ),
    ]
    args: Annotated[
        list[Annotated[str, msgspec.Meta(max_length=MAX_ARG_BYTES)]],
        msgspec.Meta(
            max_length=MAX_ARGS, description=f"Each at most {MAX_ARG_BYTES:,} UTF-8 bytes, no NUL."
        ),
    ] = []
    stdin: Annotated[
        str,
        msgspec.Meta(
            max_length=MAX_STDIN_BYTES, description=f"At most {MAX_STDIN_BYTES:,} UTF-8 bytes."
        ),
    ] = ""


class CallParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True, rename="camel"):
    """Params of a FLOW Run/1 `capability/call` (or `effect/call`).

    `input` is left undecoded here: request validation checks it rule by rule, in order.
    """

    operation_id: Annotated[
        str,
        msgspec.Meta(pattern=OPERATION_ID_PATTERN, min_length=1, max_length=OPERATION_ID_MAX_BYTES),
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
