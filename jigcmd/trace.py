"""Stage timestamps for finding where a run's time goes (`JIGCMD_TRACE=1`, to stderr).

Off by default and then free: `mark` is a no-op function. On, each mark writes one line
`jigcmd-trace <CLOCK_MONOTONIC ms> <pid> <process CPU ms> <label>`; processes share the clock,
so the lines of the server, zygote, supervisor, init and candidate merge into one timeline
(`sort -k2 -n`), and the CPU a process (all its threads) spent between two of its marks is the
difference of their third fields. The zygote inherits the setting through its command line.
"""

from __future__ import annotations

import os
import time

__all__ = ["ENABLED", "mark"]

ENABLED = os.environ.get("JIGCMD_TRACE") == "1"


def _mark(label: str) -> None:
    line = (
        f"jigcmd-trace {time.monotonic() * 1000:.3f} {os.getpid()}"
        f" {time.process_time() * 1000:.3f} {label}\n"
    )
    os.write(2, line.encode())


def _off(label: str) -> None:
    del label


mark = _mark if ENABLED else _off
