"""The digests jigcmd publishes or compares: contract descriptor, candidate, stdin, operation."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from jigcmd.jsonio.canonical import dumps

__all__ = [
    "DESCRIPTOR_DOMAIN",
    "candidate_digest",
    "descriptor_digest",
    "operation_signature",
    "sha256_text",
    "stdin_digest",
]

# Domain separation prefix of descriptor digests; a NUL byte follows it.
DESCRIPTOR_DOMAIN = b"FLOW-Capability-Contract/1"


def sha256_text(data: bytes) -> str:
    """Write the SHA-256 of `data` as `sha256:` + 64 lowercase hex digits."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def descriptor_digest(descriptor: object) -> str:
    """Digest a parsed descriptor: the whole object, `$schema` included, no `$ref` resolved."""
    return sha256_text(DESCRIPTOR_DOMAIN + b"\x00" + dumps(descriptor))


def candidate_digest(files: Mapping[str, str]) -> str:
    """Digest a candidate: canonical JSON of its `files` map, no prefix bytes."""
    return sha256_text(dumps(dict(files)))


def stdin_digest(stdin: str) -> str:
    """Digest stdin as its UTF-8 bytes (absent stdin is the empty string)."""
    return sha256_text(stdin.encode("utf-8"))


def operation_signature(method: str, params: Mapping[str, object]) -> str:
    """Identify a call for exact replay: canonical JSON of method and params minus operationId."""
    rest = {key: value for key, value in params.items() if key != "operationId"}
    return sha256_text(dumps({"method": method, "params": rest}))
