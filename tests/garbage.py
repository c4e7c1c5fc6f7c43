"""What a block of code leaves to the garbage collector: objects freed only as cycles."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def cyclic_garbage() -> Iterator[set[str]]:
    """The type names of the objects the block left in reference cycles (filled at its end)."""
    found: set[str] = set()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield found
        gc.collect()
        found.update(type(kept).__name__ for kept in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
