"""A working directory removed under us (`cd /tmp/d; rmdir /tmp/d; jigcmd …`).

`os.getcwd()` then fails, and with it every relative path and `Path.absolute()` (a
traceback, far from the option that caused it). A relative path given cannot mean anything
any more and is refused by name; with absolute paths only, jigcmd moves to `/`, so that what
asks for the working directory later (the host paths a refusal hides) works.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["FIX", "GONE", "settle_working_directory"]

GONE = "the working directory no longer exists"
FIX = "give absolute paths or cd elsewhere"
# Paths jigcmd takes from its environment: relative, `/` would quietly become their base.
_PATH_VARIABLES = ("JIGCMD_STATE_DIR", "JIGCMD_BUN", "JIGCMD_SIGNING_KEY")
# Standard input (`verify -`, `--stdin-file -`): no path, so nothing to find.
_STDIN = Path("-")


def settle_working_directory(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> str | None:
    """None when the working directory is usable (or was gone and nothing needed it, now
    `/`); else why not, naming the relative path and the fix."""
    try:
        os.getcwd()
        return None
    except FileNotFoundError:
        pass
    environ = os.environ if environ is None else environ
    relative = [
        repr(str(value))
        for value in vars(args).values()
        if isinstance(value, Path) and not value.is_absolute() and value != _STDIN
    ]
    relative += [
        f"${name}={environ[name]!r}"
        for name in _PATH_VARIABLES
        if environ.get(name) and not os.path.isabs(environ[name])
    ]
    if relative:
        named = ", ".join(relative)
        return f"{GONE}, so the relative path {named} cannot be found: {FIX}"
    os.chdir("/")
    return None
