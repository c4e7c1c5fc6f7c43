"""Digests of the descriptor, candidates, stdin and operations (spec-notes §1, §2, §6.1)."""

from __future__ import annotations

import json
from pathlib import Path

from jigcmd.contract import CONTRACT_DIGEST, CONTRACT_ID, CONTRACT_VERSION
from jigcmd.policy.digests import (
    candidate_digest,
    descriptor_digest,
    operation_signature,
    stdin_digest,
)

DESCRIPTOR_PATH = Path(__file__).parents[2] / "schemas" / "project-command.capability.json"

SPEC_FILES = {
    "src/value.ts": "export const value = 2",
    "test/project.test.ts": (
        'import { test, expect } from "bun:test"; import { value } from "../src/value.ts"; '
        'test("value", () => expect(value).toBe(2))'
    ),
}
CLI_FILES = {
    "src/cli.ts": 'console.log("ok")',
    "test/cli.test.ts": 'import {test} from "bun:test"; test("ok", () => {})',
}


def test_shipped_descriptor_copy_has_the_contract_digest() -> None:
    """The descriptor under schemas/ hashes to the published contract digest."""
    descriptor = json.loads(DESCRIPTOR_PATH.read_bytes())
    assert descriptor_digest(descriptor) == CONTRACT_DIGEST


def test_shipped_descriptor_copy_has_the_contract_identity() -> None:
    """The descriptor under schemas/ carries the contract ID and version."""
    descriptor = json.loads(DESCRIPTOR_PATH.read_bytes())
    assert (descriptor["id"], descriptor["version"]) == (CONTRACT_ID, CONTRACT_VERSION)


def test_descriptor_digest_covers_every_field() -> None:
    """Changing any part of the descriptor, even `$schema`, changes the digest."""
    descriptor = json.loads(DESCRIPTOR_PATH.read_bytes())
    descriptor["$schema"] = "https://example.invalid/other.json"
    assert descriptor_digest(descriptor) != CONTRACT_DIGEST


def test_spec_example_candidate_digest() -> None:
    """The spec example files digest to the published vector."""
    assert candidate_digest(SPEC_FILES) == (
        "sha256:cee75eae80df5f56d57014878666794a695b7a139bfe2e26a79fbdd8b7908eb0"
    )


def test_cli_candidate_digest() -> None:
    """The cli example files digest to the published vector."""
    assert candidate_digest(CLI_FILES) == (
        "sha256:5ee36627197356b057810d405cbc81526351f0ee85c48abcb921a7eaa01db019"
    )


def test_candidate_digest_ignores_insertion_order() -> None:
    """The same files in another order give the same digest."""
    reordered = dict(reversed(list(SPEC_FILES.items())))
    assert candidate_digest(reordered) == candidate_digest(SPEC_FILES)


def test_empty_stdin_digest() -> None:
    """Absent stdin digests as the empty string."""
    assert stdin_digest("") == (
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )


def test_record_stdin_digest() -> None:
    """Stdin "record\\n" digests to the published vector."""
    assert stdin_digest("record\n") == (
        "sha256:59772b9c70d6cc244274937445f7c5b56ec6fe0a11292c4ed68848655515a1e6"
    )


def test_operation_signature_matches_an_independent_node_computation() -> None:
    """The signature equals sha256 of Node's JSON.stringify of {method, params} with sorted keys."""
    params = {
        "operationId": "op-1",
        "slot": "project",
        "method": "run",
        "input": {"files": {"src/cli.ts": "x"}, "command": "cli"},
    }
    assert operation_signature("capability/call", params) != operation_signature("run", params)
    assert operation_signature("run", params) == (
        "sha256:fecde9e0b47f845bcc8b8571b32e677ca41f8b487449cbdb885c9c9c48668fda"
    )


def test_operation_signature_ignores_the_operation_id() -> None:
    """Two calls differing only in operationId have the same signature."""
    first = {"operationId": "a", "slot": "project", "method": "run", "input": {}}
    second = {**first, "operationId": "b"}
    assert operation_signature("capability/call", first) == operation_signature(
        "capability/call", second
    )


def test_operation_signature_sees_any_other_param_change() -> None:
    """A change to any other param changes the signature."""
    first = {"operationId": "a", "slot": "project", "method": "run", "input": {"stdin": ""}}
    second = {**first, "input": {"stdin": " "}}
    assert operation_signature("capability/call", first) != operation_signature(
        "capability/call", second
    )
