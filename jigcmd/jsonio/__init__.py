"""Strict JSON/1 decoding, Canonical JSON/1 encoding and JSON text for people (pure)."""

__all__: list[str] = []
