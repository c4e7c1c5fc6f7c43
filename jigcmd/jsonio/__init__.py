"""Strict JSON/1 decoding and Canonical JSON/1 encoding (pure)."""
