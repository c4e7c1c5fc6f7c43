"""What words `run` and `request` did not know most likely are: the command's own arguments.

A run command's follow `--`, so the usage error shows the same command line with them moved
there. A test command takes none (docs/validation.md rule 8), and moving them behind `--`
only earns a second refusal: for a test command the hint is how to run fewer tests instead.
The kind is read from a TOML or JSON Binding; where it cannot be told (`request`, which
reads no Binding, a TypeScript Binding, one that does not load), the `--` line is given and
says that a test command takes no arguments.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from jigcmd.cliparser import UsageError, parser
from jigcmd.command.bindingfile import is_script
from jigcmd.policy.binding import BindingError, parse_binding_file

__all__ = ["dashes_hint"]

_UNKNOWN = "unrecognized arguments: "


def dashes_hint(message: str, argv: list[str]) -> str:
    """The hint to add to argparse's `message` for `argv` ("" when it is not about unknown
    words)."""
    if not message.startswith(_UNKNOWN):
        return ""
    unknown = message.removeprefix(_UNKNOWN).split(" ")
    kept = list(argv)
    for word in unknown:
        if word in kept:
            kept.remove(word)
    kind, command, binding = _command_kind(kept)
    if kind == "test" and binding is not None:
        return _test_hint(command, binding)
    suggestion = shlex.join(["jigcmd", *kept, "--", *unknown])
    told = "" if kind == "run" else " (a run command's; a test command accepts none)"
    return f"; a command's own arguments follow `--`: {suggestion}{told}"


def _test_hint(command: str, binding: Path) -> str:
    """Rule 8, and the Binding's way to run only some test files (`bun test` options such
    as `--bail` or `-t` have no equivalent)."""
    quoted = shlex.quote(str(binding))
    return (
        f"; test command {command!r} accepts no arguments, after `--` or not (docs/"
        "validation.md rule 8); to run only some of its test files, add a command to "
        f"{quoted} whose `test` list names just those, then admit it again: jigcmd lock "
        f"--binding {quoted} (bun test's own options, such as --bail or -t, have no "
        "equivalent)"
    )


def _command_kind(argv: list[str]) -> tuple[str | None, str, Path | None]:
    """The kind (`run`, `test`) of the command `argv` names, its name and its Binding; a
    kind of None when it cannot be told."""
    try:
        args = parser().parse_args(argv)
    except UsageError:
        return None, "", None
    command = str(getattr(args, "command", ""))
    binding = getattr(args, "binding", None)
    if not isinstance(binding, Path) or is_script(binding):
        return None, command, None
    try:
        data = binding.read_bytes()
        policy = parse_binding_file(data, suffix=binding.suffix, source=str(binding))
    except (OSError, BindingError):
        return None, command, None
    found = policy.commands.get(command)
    return (None if found is None else found.kind), command, binding
