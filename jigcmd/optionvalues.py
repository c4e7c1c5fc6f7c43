"""What each command-line option's text means: the value types the parser's options use.

Each raises `argparse.ArgumentTypeError` with the reason, so argparse's usage error names the
option and the value. Numbers are ASCII digits (and, for seconds, a decimal point) and
nothing else: `int()` and `float()` would also take " 3", "+3", "-0", "1_000", a full-width
"3" (other scripts' digits), "1e3" or "nan", none of which means a count, a port or a deadline.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from jigcmd.workdir import FIX, GONE

__all__ = [
    "binding_file",
    "budget",
    "decimal",
    "older_than",
    "path",
    "port",
    "positive_int",
    "retain",
    "seconds",
    "unix_ms",
    "whole_number",
]

# Whole numbers longer than this are refused as such (int() itself stops at 4300 digits).
_MAX_DIGITS = 30
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")


def path(text: str) -> Path:
    """A path option's value, never empty: `Path("")` is `.`, the working directory.

    An empty value is most often an unset shell variable (`--state-dir "$STATE"`), and the
    working directory made the state directory, or written to, is never what was meant.
    """
    if not text:
        raise argparse.ArgumentTypeError(
            "an empty path (an unset shell variable?) would mean the current directory; "
            "give the path, or . for the current directory"
        )
    return Path(text)


def cgroup_base(text: str) -> str:
    """A `--cgroup-base` value, never empty: an empty one is not the default base."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"an empty cgroup base {text!r} (an unset shell variable?) names no cgroup; give "
            "the base, or leave --cgroup-base out for the default"
        )
    return text


def whole_number(text: str, what: str = "a whole number") -> int:
    """A whole number written in the digits 0-9 and nothing else (no sign, space or `_`)."""
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not {what}: write it in the digits 0-9 alone (no sign, space or _)"
        )
    if len(text) > _MAX_DIGITS:
        raise argparse.ArgumentTypeError(f"{text[:_MAX_DIGITS]}… is not {what}: far too large")
    return int(text)


def decimal(text: str) -> float:
    """`run --timeout`: a number of seconds in the digits 0-9, with a decimal point or not."""
    if _DECIMAL.fullmatch(text) is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds: digits 0-9 and a decimal point only "
            "(no sign, space, _ or exponent)"
        )
    return float(text)


def unix_ms(text: str) -> int:
    """`--root-deadline-unix-ms`, and `JIGCMD_ROOT_DEADLINE_UNIX_MS` alike: 0 to 2^53-1."""
    from jigcmd.jsonio.strict import MAX_SAFE_INTEGER  # noqa: PLC0415 - imported per verb to keep start-up light

    value = whole_number(text, "Unix milliseconds, a non-negative integer")
    if value > MAX_SAFE_INTEGER:
        # The same bound as a call's `deadlineUnixMs`: strict JSON refuses anything larger.
        raise argparse.ArgumentTypeError(
            f"{text} is beyond 2^53-1 ({MAX_SAFE_INTEGER}), the largest deadline a call may "
            "carry; Unix milliseconds are far below it"
        )
    return value


def positive_int(text: str) -> int:
    """A count such as `--max-envelopes`: a whole number, at least 1."""
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def port(text: str) -> int:
    """`--port`: a TCP port, or 0 for any free one."""
    value = whole_number(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0 to 65535; 0: any free one)")
    return value


def binding_file(text: str) -> Path:
    """A `--binding` path, absolute from the start (from the working directory).

    Everything found from the Binding's place (its project root and `jig.ts` above
    `bindings/`, its package, its lock) then means the same whatever directory it was named
    from: `command.ts` from inside `bindings/` has `bindings` as its parent's name.
    """
    given = path(text)
    try:
        return given.absolute()
    except FileNotFoundError:
        # Removed under us; a traceback from the parser would name no option.
        raise argparse.ArgumentTypeError(f"{text}: {GONE}: {FIX}") from None


def budget(text: str) -> int:
    """`--result-budget`: whole bytes, at least what the counts and digests need."""
    from jigcmd.protocol.dialect import MIN_BUDGET_BYTES  # noqa: PLC0415 - imported per verb to keep start-up light

    value = whole_number(text, "a whole number of bytes")
    if value < MIN_BUDGET_BYTES:
        raise argparse.ArgumentTypeError(f"at least {MIN_BUDGET_BYTES} bytes, not {value}")
    return value


def seconds(text: str) -> float:
    """`--queue-wait`: seconds, more than 0 and at most a day."""
    value = decimal(text)
    if not 0 < value <= 86_400:
        raise argparse.ArgumentTypeError(f"more than 0 and at most 86400 seconds, not {text}")
    return value


def older_than(text: str) -> int:
    """`prune --older-than`: a duration such as 7d or 12h, in seconds."""
    from jigcmd.durable.retention import parse_duration  # noqa: PLC0415 - imported per verb to keep start-up light

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def retain(text: str) -> int:
    """`--retain`: a duration of at least an hour, in seconds."""
    from jigcmd.durable.retention import MIN_RETAIN_S  # noqa: PLC0415 - imported per verb to keep start-up light

    seconds = older_than(text)
    if seconds < MIN_RETAIN_S:
        raise argparse.ArgumentTypeError(
            f"{text!r} is shorter than an hour: a retention that short would prune answers a "
            "retrying caller may still ask for"
        )
    return seconds
