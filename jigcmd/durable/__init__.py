"""What outlives a process: the state directory, run ownership, slots, recovery."""

__all__: list[str] = []
