"""The Project Command slice: one command path from a request to its evidence."""

__all__: list[str] = []
