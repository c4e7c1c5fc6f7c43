"""The contract module states what the project-command descriptor states."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jigcmd import contract
from jigcmd.policy.digests import descriptor_digest

DESCRIPTOR = Path(__file__).parents[1] / "schemas" / "project-command.capability.json"


def descriptor() -> dict[str, Any]:
    return json.loads(DESCRIPTOR.read_bytes())  # type: ignore[no-any-return]


def test_the_identity_is_the_descriptors_id_version_and_digest() -> None:
    """CONTRACT_ID, CONTRACT_VERSION and CONTRACT_DIGEST name the descriptor jigcmd ships."""
    document = descriptor()
    assert (document["id"], document["version"]) == (
        contract.CONTRACT_ID,
        contract.CONTRACT_VERSION,
    )
    assert descriptor_digest(document) == contract.CONTRACT_DIGEST
    assert list(document["methods"]) == [contract.RUN_METHOD]


def test_the_input_limits_are_the_descriptors() -> None:
    """Each request limit is the bound the descriptor's `Input` writes for it."""
    properties = descriptor()["$defs"]["Input"]["properties"]
    assert properties["command"]["maxLength"] == contract.LOCAL_NAME_MAX_CHARS
    assert properties["files"]["maxProperties"] == contract.MAX_FILES
    assert properties["files"]["additionalProperties"]["maxLength"] == contract.MAX_CANDIDATE_BYTES
    assert properties["args"]["maxItems"] == contract.MAX_ARGS
    assert properties["args"]["items"]["maxLength"] == contract.MAX_ARG_BYTES
    assert properties["stdin"]["maxLength"] == contract.MAX_STDIN_BYTES
    assert tuple(properties) == contract.INPUT_KEYS


def test_the_output_cap_is_the_descriptors_stream_bound() -> None:
    """Each output stream's text is bounded by OUTPUT_CAP_BYTES."""
    result = descriptor()["$defs"]["Result"]["properties"]
    for stream in ("stdout", "stderr"):
        assert result[stream]["properties"]["text"]["maxLength"] == contract.OUTPUT_CAP_BYTES
