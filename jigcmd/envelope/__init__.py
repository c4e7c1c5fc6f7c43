"""The containment envelope: mechanism that executes a `RunPlan` and decides nothing."""

__all__: list[str] = []
