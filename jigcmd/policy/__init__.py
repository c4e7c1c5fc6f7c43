"""Command policy: Binding, manifest, lock, request validation, digests, planning (pure)."""

__all__: list[str] = []
