"""Stage timestamps for finding where a run's time goes (`JIGCMD_TRACE=1`, to stderr).

Off by default and then free: `mark` is a no-op function. On, each mark writes one line
`jigcmd-trace <CLOCK_MONOTONIC ms> <pid> <label>`; processes share the clock, so the lines of
the server, zygote, supervisor, init and candidate merge into one timeline
(`sort -k2 -n`). The zygote inherits the setting through its command line.
"""

from __future__ import annotations

import os
import time

__all__ = ["ENABLED", "mark"]

ENABLED = os.environ.get("JIGCMD_TRACE") == "1"


def _mark(label: str) -> None:
    os.write(2, f"jigcmd-trace {time.monotonic() * 1000:.3f} {os.getpid()} {label}\n".encode())


def _off(label: str) -> None:
    del label


mark = _mark if ENABLED else _off
