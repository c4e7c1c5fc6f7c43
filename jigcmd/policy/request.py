"""Request validation: the `run` input checked against the admitted commands (spec-notes §4).

The rules run in the documented order and the first failure ends the call with
`INVALID_INPUT`, naming the rule and the JSON pointer where it failed, but for a well-formed
command name the Binding does not configure: that call is `UNAVAILABLE` (the seed). Sizes
are counted in UTF-8 bytes, not code points.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from jigcmd.contract import (
    INPUT_KEYS,
    LOCAL_NAME_MAX_CHARS,
    MAX_ARG_BYTES,
    MAX_ARGS,
    MAX_CANDIDATE_BYTES,
    MAX_FILES,
    MAX_STDIN_BYTES,
)
from jigcmd.errors import Code, JigError
from jigcmd.jsonio.canonical import CanonicalError
from jigcmd.policy.binding import CommandPolicy
from jigcmd.policy.digests import candidate_digest, stdin_digest
from jigcmd.policy.paths import is_local_name, path_problem, renamed_path, reserved_component
from jigcmd.policy.pointers import escape, kind

__all__ = ["ValidRequest", "lone_surrogate", "not_strict", "validate_request"]


class ValidRequest(msgspec.Struct, frozen=True):
    """A request that passed every rule, with its digests and logical invocation."""

    command: CommandPolicy
    files: tuple[tuple[str, str], ...]
    args: tuple[str, ...]
    stdin: str
    candidate_digest: str
    stdin_digest: str
    invocation: list[str]


# Rule 8's way out: what a Binding offers instead of `bun test`'s own options.
_TEST_ARGS_FIX = (
    "call it with no arguments; to run only some of its test files, the Binding needs a "
    "command whose `test` list names just those, admitted again with `jigcmd lock` (bun "
    "test's own options, such as --bail or -t, have no equivalent)"
)


def _invalid(pointer: str, rule: str, message: str) -> JigError:
    return JigError(Code.INVALID_INPUT, message, {"pointer": pointer, "rule": rule})


def lone_surrogate(pointer: str) -> JigError:
    """The refusal of a lone surrogate at `pointer` of the input (no UTF-8 encodes one)."""
    return not_strict(pointer, "lone surrogate")


def not_strict(pointer: str, problem: str) -> JigError:
    """The refusal of input that breaks a strict JSON/1 rule at `pointer` (spec-notes §4)."""
    where = pointer or "input"
    return _invalid(pointer, "strict-json", f"{where}: {problem}; input must be strict JSON")


def _utf8_size(text: str, pointer: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        # Strict JSON decoding rejects lone surrogates; this guards callers that skipped it.
        raise lone_surrogate(pointer) from exc


def validate_request(input: object, commands: Mapping[str, CommandPolicy]) -> ValidRequest:
    """Check a decoded `run` input against spec-notes §4 rules 1-8, in order."""
    command = _rule1_command(input, commands)
    assert isinstance(input, dict)
    files = _rule3_paths(_rule2_files(input))
    _rule4_total_size(files)
    args = _rule5_args(input)
    stdin = _rule6_stdin(input)
    _rule7_named_files(command, files)
    _rule8_test_args(command, args)
    try:
        digest = candidate_digest(files)
    except CanonicalError as exc:
        raise _invalid("/files", "strict-json", f"/files: {exc}") from exc
    return ValidRequest(
        command=command,
        files=tuple(sorted(files.items())),
        args=tuple(args),
        stdin=stdin,
        candidate_digest=digest,
        stdin_digest=stdin_digest(stdin),
        invocation=command.invocation(args),
    )


def _rule1_command(data: object, commands: Mapping[str, CommandPolicy]) -> CommandPolicy:
    if not isinstance(data, dict):
        raise _invalid("", "input-object", f"input must be an object, got {kind(data)}")
    for key in data:
        if key not in INPUT_KEYS:
            pointer = f"/{escape(str(key))}"
            raise _invalid(
                pointer,
                "input-keys",
                f"{pointer}: unknown input field; allowed are command, files, args, stdin",
            )
    if "command" not in data:
        raise _invalid("/command", "command", "/command: required")
    name = data["command"]
    if not isinstance(name, str):
        raise _invalid("/command", "command", f"/command: must be a string, got {kind(name)}")
    if name in commands:
        return commands[name]
    admitted = ", ".join(sorted(commands)) or "none"
    if not is_local_name(name):
        raise _invalid(
            "/command",
            "command",
            f"/command: {_named(name)!r} is not a command name (a LocalName, "
            "^[a-z0-9]+(?:-[a-z0-9]+)*$, "
            f"at most {LOCAL_NAME_MAX_CHARS} characters; admitted: {admitted})",
        )
    # The seed: "an otherwise valid unconfigured command target is unavailable" (the call
    # fails; the others keep working), not a bad request.
    raise JigError(
        Code.UNAVAILABLE,
        f"command {name!r} is not configured by the admitted Binding (admitted: {admitted})",
    )


def _named(name: str) -> str:
    """A name that is not a command's, as a refusal quotes it: a long one (the caller's, of
    any length) cut to its start, so the rule said after it is never what is cut."""
    limit = 4 * LOCAL_NAME_MAX_CHARS
    return name if len(name) <= limit else name[:limit] + "…"


def _rule2_files(data: dict[str, object]) -> dict[str, object]:
    if "files" not in data:
        raise _invalid("/files", "files", "/files: required")
    files = data["files"]
    if not isinstance(files, dict):
        raise _invalid("/files", "files", f"/files: must be an object, got {kind(files)}")
    if not 1 <= len(files) <= MAX_FILES:
        raise _invalid(
            "/files", "files", f"/files: must have 1-{MAX_FILES} entries, got {len(files)}"
        )
    return files


def _rule3_paths(raw: dict[str, object]) -> dict[str, str]:
    files: dict[str, str] = {}
    for path, text in raw.items():
        pointer = f"/files/{escape(path)}"
        problem = path_problem(path)
        if problem is not None:
            renamed = renamed_path(path)
            to = f"; rename it to {renamed}" if renamed is not None and renamed not in raw else ""
            raise _invalid(pointer, "path-grammar", f"{pointer}: {problem}{to}")
        reserved = reserved_component(path)
        if reserved is not None:
            raise _invalid(pointer, "reserved-path", f"{pointer}: reserved directory {reserved}")
        if not isinstance(text, str):
            raise _invalid(
                pointer, "file-text", f"{pointer}: file content must be a string, got {kind(text)}"
            )
        files[path] = text
    for path in files:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            directory = "/".join(parts[:depth])
            if directory in files:
                raise _invalid(
                    "/files",
                    "path-collision",
                    f"/files: {directory!r} is both a file and a directory (because of {path!r})",
                )
    return files


def _rule4_total_size(files: dict[str, str]) -> None:
    total = 0
    for path, text in files.items():
        total += _utf8_size(text, f"/files/{escape(path)}")
    if total > MAX_CANDIDATE_BYTES:
        raise _invalid(
            "/files",
            "candidate-size",
            f"candidate exceeds {MAX_CANDIDATE_BYTES // 1024} KiB ({total:,} bytes)",
        )


def _rule5_args(data: dict[str, object]) -> list[str]:
    args = data.get("args", [])
    if not isinstance(args, list):
        raise _invalid("/args", "args", f"/args: must be an array of strings, got {kind(args)}")
    if len(args) > MAX_ARGS:
        raise _invalid("/args", "args", f"/args: at most {MAX_ARGS} arguments, got {len(args)}")
    for index, arg in enumerate(args):
        pointer = f"/args/{index}"
        if not isinstance(arg, str):
            raise _invalid(pointer, "args", f"{pointer}: must be a string, got {kind(arg)}")
        size = _utf8_size(arg, pointer)
        if size > MAX_ARG_BYTES:
            raise _invalid(
                pointer, "args", f"{pointer}: argument exceeds {MAX_ARG_BYTES:,} bytes ({size:,})"
            )
        if "\x00" in arg:
            raise _invalid(pointer, "args", f"{pointer}: argument contains a NUL character")
    return args


def _rule6_stdin(data: dict[str, object]) -> str:
    stdin = data.get("stdin", "")
    if not isinstance(stdin, str):
        raise _invalid("/stdin", "stdin", f"/stdin: must be a string, got {kind(stdin)}")
    size = _utf8_size(stdin, "/stdin")
    if size > MAX_STDIN_BYTES:
        raise _invalid(
            "/stdin", "stdin", f"/stdin: exceeds {MAX_STDIN_BYTES:,} bytes ({size:,} bytes)"
        )
    return stdin


def _rule7_named_files(command: CommandPolicy, files: dict[str, str]) -> None:
    for path in command.paths:
        if path not in files:
            raise _invalid(
                "/files",
                "command-files",
                f"/files: command {command.name!r} needs {path!r}, which is not in files",
            )


def _rule8_test_args(command: CommandPolicy, args: list[str]) -> None:
    if args and not command.accepts_args:
        raise _invalid(
            "/args",
            "test-args",
            f"/args: test command {command.name!r} accepts no arguments (got {len(args)}); "
            f"fix: {_TEST_ARGS_FIX}",
        )
