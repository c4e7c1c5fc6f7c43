"""`serve --retain`: the state directory pruned at start and hourly, off every call's path.

Each prune is a `jigcmd prune --older-than … --json` child process on the server's state
directory, exactly as an operator's would be. Not a second journal connection in the
server: SQLite's locks are POSIX record locks, held per process, and a second opener in
the same process would drop the server connection's when it closes the file.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import msgspec

__all__ = ["keep_pruning"]

# How often a server with `--retain` prunes, after its first prune at start.
RETAIN_EVERY_S = 3600


async def keep_pruning(directory: Path, retain_s: int, say: Callable[[str], None]) -> None:
    """Prune what closed more than `retain_s` ago now and then hourly, until cancelled.

    `say` gets one line for each prune that removed something, or that failed (serving goes
    on, and the next prune tries again).
    """
    # Exactly the server's import path, as for the zygote: `python -m jigcmd` would put the
    # working directory first, and a `jigcmd/` there would run in the server's name.
    bootstrap = (
        f"import sys; sys.path[:] = {sys.path!r}; "
        "from jigcmd.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    argv = [sys.executable, "-I", "-S", "-c", bootstrap, "prune", "--state-dir", str(directory)]
    argv += ["--older-than", f"{retain_s}s", "--json"]
    while True:
        # Its stdin is not the protocol's: a serve session's frames are its peer's alone.
        done = await anyio.run_process(argv, stdin=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            why = done.stderr.decode("utf-8", "replace").strip().splitlines()
            say(f"retention: {why[-1] if why else f'prune exited {done.returncode}'}; "
                "serving goes on, and the next prune tries again")  # fmt: skip
        else:
            said = _summary(done.stdout)
            if said:
                say(said)
        await anyio.sleep(RETAIN_EVERY_S)


class _Pruned(msgspec.Struct, rename="camel"):
    """What of `jigcmd prune --json`'s answer the line says."""

    closed_before: str
    operations: int
    jarvis_runs: int
    journal_bytes_removed: int
    journal_free_bytes: int
    resource_operations: int
    resource_bytes_removed: int


_decode = msgspec.json.Decoder(_Pruned).decode


def _summary(stdout: bytes) -> str:
    """One line of what a prune removed; empty when it removed nothing."""
    try:
        pruned = _decode(stdout)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return "retention: the prune's answer could not be read; serving goes on"
    if not (pruned.operations or pruned.jarvis_runs or pruned.resource_operations):
        return ""
    removed = pruned.journal_bytes_removed + pruned.resource_bytes_removed
    return (
        f"retention: pruned {pruned.operations} operation(s) and {pruned.jarvis_runs} jarvis "
        f"run(s) closed before {pruned.closed_before} ({removed} bytes; the journal has "
        f"{pruned.journal_free_bytes} bytes free for reuse)"
    )
