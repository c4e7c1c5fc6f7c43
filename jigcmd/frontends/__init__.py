"""The command-line fronts: each turns CLI arguments into calls on the shared service."""

__all__: list[str] = []
