"""What each command-line option's text means: the value types the parser's options use.

Each raises `argparse.ArgumentTypeError` with the reason, so argparse's usage error names the
option and the value.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = [
    "binding_file",
    "budget",
    "older_than",
    "path",
    "port",
    "positive_int",
    "retain",
    "seconds",
]


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


def positive_int(text: str) -> int:
    """A count such as `--max-envelopes`: a whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def port(text: str) -> int:
    """`--port`: a TCP port, or 0 for any free one."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (0 to 65535; 0: any free one)")
    return value


def binding_file(text: str) -> Path:
    """A `--binding` path, absolute from the start (from the working directory).

    Everything found from the Binding's place (its project root and `jig.ts` above
    `bindings/`, its package, its lock) then means the same whatever directory it was named
    from: `command.ts` from inside `bindings/` has `bindings` as its parent's name.
    """
    return path(text).absolute()


def budget(text: str) -> int:
    """`--result-budget`: whole bytes, at least what the counts and digests need."""
    from jigcmd.protocol.dialect import MIN_BUDGET_BYTES  # noqa: PLC0415 - imported per verb to keep start-up light

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of bytes") from None
    if value < MIN_BUDGET_BYTES:
        raise argparse.ArgumentTypeError(f"at least {MIN_BUDGET_BYTES} bytes, not {value}")
    return value


def seconds(text: str) -> float:
    """`--queue-wait`: seconds, more than 0 and at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
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
