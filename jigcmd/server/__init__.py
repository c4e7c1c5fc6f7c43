"""The anyio shell around the sans-IO protocol core: the only code touching stdin/stdout."""

__all__: list[str] = []
