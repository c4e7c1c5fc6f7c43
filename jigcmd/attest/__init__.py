"""Signed run statements: in-toto Statement v1 in DSSE, Ed25519 (see docs/attestation.md)."""

__all__: list[str] = []
