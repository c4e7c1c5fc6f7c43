"""The signals that stop a front: each is read as a cancel, never left to end the process.

A process ended by a signal's default action answers nothing and fences nothing (its run is
found `UNCERTAIN` later). `jigcmd serve` reads a stop signal as coordinator loss, `jigcmd run`
as its caller's cancel; either way the run in flight is fenced and answered `CANCELLED`.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Final

import anyio
import anyio.abc

__all__ = ["STOP_SIGNALS", "watch_stop_signals"]

# SIGHUP too: the terminal or the session a front was started from has gone, its caller with it.
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


async def watch_stop_signals(
    on_signal: Callable[[signal.Signals], None],
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Until cancelled, call `on_signal` for each stop signal instead of its default action.

    Started (`task_status`) once the handlers are in place; a second signal while the first
    is being acted on is passed on too (so `on_signal` must be idempotent), never fatal.
    """
    with anyio.open_signal_receiver(*STOP_SIGNALS) as received:
        task_status.started()
        async for signum in received:
            on_signal(signal.Signals(signum))
