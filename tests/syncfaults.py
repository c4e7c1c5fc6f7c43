"""The journal's syncs without waiting (Linux AIO) in tests: whether there are any, and a disk
that fails them."""

from __future__ import annotations

import ctypes
import errno

import pytest

from jigcmd.journal import aiosync
from jigcmd.journal.aiosync import AioSync
from tests.required import unavailable

__all__ = ["failing_syncs", "require_aio"]


def require_aio() -> None:
    """Skip (fail under CI) where this kernel, or its seccomp filter, gives no AIO context."""
    context = AioSync.open(lambda error: None)
    if context is None:
        unavailable("this kernel (or its seccomp filter) gives no AIO context (io_setup)")
    else:
        context.close()


def failing_syncs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every AIO sync that completes from now on completes with EIO, as on a failed disk.

    The syncs themselves are real (submitted, run and completed by the kernel); only what
    `io_getevents` reports of them is changed.
    """
    real = aiosync._io_getevents

    def getevents(number: int, context: int, least: int, most: int, *rest: object) -> int:
        count: int = real(number, context, least, most, *rest)
        events = rest[0]
        assert isinstance(events, ctypes.Array)
        for event in events[: max(count, 0)]:
            event.res = -errno.EIO
        return count

    monkeypatch.setattr(aiosync, "_io_getevents", getevents)
