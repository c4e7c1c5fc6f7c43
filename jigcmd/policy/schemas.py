"""The JSON Schemas generated from the wire types (contract, evidence, policy, run predicate).

`scripts/gen_schemas.py` writes `generate()` to `schemas/` and copies that into the package
(`jigcmd/schemas/`, what an installed jigcmd carries); a test fails when any of them differ.
"""

from __future__ import annotations

import msgspec

from jigcmd.attest.statement import JarvisRunPredicate, JarvisRunPredicateV2, RunPredicate
from jigcmd.contract import CallParams, RequestInput
from jigcmd.evidence import Evidence
from jigcmd.jsonio import readable
from jigcmd.policy.binding import PolicyDocument
from jigcmd.policy.lock import Lock

__all__ = ["generate"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


# File name, root type, extra types whose definitions the root refers to by hand.
_DOCUMENTS: tuple[tuple[str, type[msgspec.Struct], tuple[type[msgspec.Struct], ...]], ...] = (
    ("binding.schema.json", PolicyDocument, ()),
    ("lock.schema.json", Lock, ()),
    ("run-input.schema.json", RequestInput, ()),
    ("run-call-params.schema.json", CallParams, (RequestInput,)),
    ("evidence.schema.json", Evidence, ()),
    # The jigcmd run predicate (predicateType https://jigcmd.dev/attestation/run/v1).
    ("run-predicate.v1.schema.json", RunPredicate, ()),
    # jarvis's (https://jigcmd.dev/attestation/jarvis-run/v1), no longer made: kept unchanged
    # for the statements journals hold; v2 names the executable.
    ("jarvis-run-predicate.v1.schema.json", JarvisRunPredicate, ()),
    ("jarvis-run-predicate.v2.schema.json", JarvisRunPredicateV2, ()),
)


def generate() -> dict[str, bytes]:
    """Every schema file's exact bytes, keyed by file name."""
    documents: dict[str, bytes] = {}
    for name, root, extras in _DOCUMENTS:
        (root_schema, *_), definitions = msgspec.json.schema_components((root, *extras))
        document = {"$schema": SCHEMA_DIALECT, **root_schema, "$defs": definitions}
        text = readable.dumps(document, indent=2, sort_keys=True) + "\n"
        documents[name] = text.encode("utf-8")
    return documents
