"""Stage timestamps for finding where a run's time goes (`JIGCMD_TRACE=1`, to stderr).

Off by default and then free: `mark` is a no-op function. On, each mark writes one line
`jigcmd-trace <CLOCK_MONOTONIC ms> <pid> <process CPU ms> <minor faults> <label>`; processes
share the clock, so the lines of the server, zygote, supervisor, init and candidate merge into
one timeline (`sort -k2 -n`). Between two marks of one process, the difference of their third
fields is the CPU it (all its threads) spent, of their fourth the pages it faulted in (in a
process forked from a larger one, mostly copies of pages it shares: docs/envelope.md). `<pid>`
is the host's: an envelope's pid 1 reads its own from the host's /proc at its first mark,
before it has a /proc of its own. The zygote inherits the setting through its command line.
"""

from __future__ import annotations

import os
import time

__all__ = ["ENABLED", "mark"]

ENABLED = os.environ.get("JIGCMD_TRACE") == "1"
if ENABLED:
    # Only when tracing: every pid 1 is a clone of the zygote's image (see plan.py).
    import resource

# Pid 1 of an envelope on the host (`os.getpid()` says 1 there), once it has marked.
_host_pid: int | None = None


def _pid() -> int:
    global _host_pid  # noqa: PLW0603 - this process's own, found once
    pid = os.getpid()
    if pid != 1:
        return pid
    if _host_pid is None:
        try:
            # /proc/self names the reader by its pid in the proc mount's namespace.
            _host_pid = int(os.readlink("/proc/self"))
        except (OSError, ValueError):
            _host_pid = pid
    return _host_pid


def _mark(label: str) -> None:
    line = (
        f"jigcmd-trace {time.monotonic() * 1000:.3f} {_pid()}"
        f" {time.process_time() * 1000:.3f}"
        f" {resource.getrusage(resource.RUSAGE_SELF).ru_minflt} {label}\n"
    )
    os.write(2, line.encode())


def _off(label: str) -> None:
    del label


mark = _mark if ENABLED else _off
