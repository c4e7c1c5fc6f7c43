"""Command policy: Binding, manifest, admission lock, request validation, digests, planning (pure)."""
