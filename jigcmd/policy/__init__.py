"""Command policy: Binding, manifest, lock, request validation, digests, planning (pure)."""
