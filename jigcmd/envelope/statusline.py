"""Pid 1's status lines (`pid1.report`), read by their exact shape: anything else is refused.

`unshared`, `prepared`, `ready PID T`, `exit N T` and `signal N T`, T in `CLOCK_MONOTONIC`
nanoseconds; `fail STEP<TAB>ERROR` is read by the supervisor before any of these. A line
of another shape (a field missing or extra, a number that is not plain decimal or out of
range) is a broken pid 1, never a moment or an exit status to guess at: signed evidence
carries the times these give.
"""

from __future__ import annotations

from typing import NamedTuple

from jigcmd.signames import signal_name

__all__ = ["Status", "parse"]

# The kinds and how many numbers follow each.
_NUMBERS = {"unshared": 0, "prepared": 0, "ready": 2, "exit": 2, "signal": 2}


class Status(NamedTuple):
    """One status line: its kind, its number (pid, exit code or signal) and its moment."""

    kind: str
    # The candidate's pid (ready), its exit code (exit) or the signal it died of (signal).
    number: int = 0
    # The moment pid 1 took for the event (monotonic seconds), not the line's handling: a
    # quick candidate's "ready" is often read after its end.
    moment: float = 0.0


def parse(line: str) -> Status:
    """The status `line` says; ValueError naming it when it has any other shape."""
    kind, *fields = line.split(" ")
    if _NUMBERS.get(kind) != len(fields) or not all(_decimal(field) for field in fields):
        raise ValueError(f"malformed status line {line!r}")
    if not fields:
        return Status(kind)
    number, moment = int(fields[0]), int(fields[1])
    if (kind == "exit" and number > 255) or (kind == "ready" and number == 0):
        raise ValueError(f"malformed status line {line!r}")
    if kind == "signal":
        try:
            signal_name(number)
        except ValueError:
            raise ValueError(f"malformed status line {line!r}: no such signal") from None
    return Status(kind, number, moment / 1e9)


def _decimal(field: str) -> bool:
    """Plain ASCII digits only (`int` would also take `+1`, ` 1`, `1_0`, other scripts' digits)."""
    return field.isascii() and field.isdigit()
