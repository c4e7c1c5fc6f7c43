"""The wall clock as jigcmd records it: Unix milliseconds (rows, deadlines, statements)."""

from __future__ import annotations

import time

__all__ = ["unix_ms"]


def unix_ms() -> int:
    """Now, in whole milliseconds since the Unix epoch."""
    return time.time_ns() // 1_000_000
