"""Durable ownership: the SQLite journal, process identity and the root envelope reservations.

Nothing is imported here: the envelope's processes import `identity` and `envelopes` alone,
and every process forked from the zygote then carries neither SQLite nor the store.
"""

__all__: list[str] = []
