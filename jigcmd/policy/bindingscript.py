"""A TypeScript (or JavaScript) Binding, as the reference writes it: what is sent, what comes back.

`bindings/<name>.ts` begins `import { defineBinding } from '@jigging/jig'` and exports
`defineBinding({...})` by default; the Binding's id is the file's LocalName basename. jigcmd
evaluates it with the bundled Bun inside an envelope (`jigcmd.command.scriptbinding`), the
candidate tree holding the Binding, the project's `jig.ts` when there is one, and jigcmd's
own `@jigging/jig` (`jigcmd/command/jigshim/`), whose definers snapshot their argument as
JSON. Its evaluator prints exactly one JSON line; anything else the module does that can be
seen (printing, throwing, exiting, running out its deadline) is a refusal naming the file,
and the line where Bun gives one. Nothing of the module reaches the rules but that JSON.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

import msgspec

from jigcmd.evidence import StopReason
from jigcmd.jsonio import strict
from jigcmd.plan import CANDIDATE_ROOT
from jigcmd.policy.binding import BindingError
from jigcmd.policy.paths import is_local_name, path_problem
from jigcmd.policy.pointers import kind

__all__ = [
    "EVALUATOR",
    "JIG_NAMES",
    "SCRIPT_SUFFIXES",
    "SHIM_DIR",
    "Evaluated",
    "Evaluation",
    "binding_id",
    "check_listed",
    "evaluation_files",
    "read_evaluation",
]

SCRIPT_SUFFIXES: Final = frozenset({".ts", ".js"})
JIG_NAMES: Final = ("jig.ts", "jig.js")
# Where jigcmd's `@jigging/jig` sits in the evaluation's tree (Bun resolves it from there).
SHIM_DIR: Final = "node_modules/@jigging/jig"
EVALUATOR: Final = f"{SHIM_DIR}/evaluate.js"
# How much of a Binding's own output a refusal quotes.
_QUOTE_CHARS: Final = 200
# A place in a Bun stack frame or position: `/work/<path>:<line>[:<column>]`.
_FRAME = re.compile(re.escape(CANDIDATE_ROOT) + r"/([^\s():]+):(\d+)(?::(\d+))?")


class Evaluation(msgspec.Struct, frozen=True):
    """How the evaluation run ended: its output and why it stopped (from the envelope)."""

    stdout: bytes
    stderr: bytes
    truncated: bool
    exit_code: int | None
    signal: str | None
    stop_reason: StopReason


class Evaluated(msgspec.Struct, frozen=True):
    """What the definers handed back: the Binding's JSON, and the `jig.ts` one (or None)."""

    binding: object
    jig: object | None


def binding_id(file_name: str, stem: str, *, source: str) -> str:
    """The Binding's id, its file's basename, which must be a LocalName (`command.ts`)."""
    if not is_local_name(stem):
        raise _refusal(
            source,
            f"a TypeScript Binding's file name is its id: {file_name!r} is not "
            "<LocalName>.ts (lowercase letters and digits, words joined by single hyphens)",
        )
    return stem


def evaluation_files(
    binding: tuple[str, str],
    jig: tuple[str, str] | None,
    shim: Mapping[str, str],
    *,
    source: str,
) -> tuple[tuple[str, str], ...]:
    """The evaluation's candidate tree: the Binding, the `jig.ts`, and jigcmd's module."""
    project = [binding] if jig is None else [binding, jig]
    for path, _ in project:
        problem = path_problem(path)
        if problem is not None:
            raise _refusal(source, f"its project path {path!r} cannot be evaluated: {problem}")
    return (*project, *((f"{SHIM_DIR}/{name}", text) for name, text in sorted(shim.items())))


def read_evaluation(
    run: Evaluation, *, source: str, host_root: str, limit_s: float, relative: str = ""
) -> Evaluated:
    """The definers' JSON from the evaluator's one line, or the refusal saying why not.

    `relative`: the Binding's path under `host_root` (`source` already names that file).
    """
    if run.stop_reason == "deadline":
        raise _refusal(
            source,
            f"its evaluation did not finish within {limit_s:g} s (a loop, or a wait that "
            "never ends)",
        )
    if run.stop_reason == "cancelled":
        raise _refusal(source, "its evaluation was cancelled")
    lines = run.stdout.decode("utf-8", "replace").splitlines()
    printed = [*lines[:-1], *run.stderr.decode("utf-8", "replace").splitlines()]
    if run.truncated or printed:
        shown = (printed or lines or ["(more than the output cap)"])[0][:_QUOTE_CHARS]
        raise _refusal(
            source, f"it printed while being evaluated (a Binding only defines): {shown!r}"
        )
    if not lines:
        ending = f"killed by {run.signal}" if run.signal else f"exit code {run.exit_code}"
        raise _refusal(
            source,
            f"its evaluation ended ({ending}) before its default export was read "
            "(process.exit, or a limit reached)",
        )
    try:
        message = strict.loads(lines[0].encode("utf-8"))
    except strict.StrictJSONError:
        raise _refusal(
            source, f"it printed while being evaluated: {lines[0][:_QUOTE_CHARS]!r}"
        ) from None
    if not isinstance(message, dict):
        raise _refusal(source, f"its evaluation answered {kind(message)}, not a definition")
    if "error" in message:
        raise _refusal(source, _failure(message["error"], host_root, relative))
    if set(message) != {"binding", "jig"}:
        raise _refusal(source, "its evaluation answered something other than a definition")
    return Evaluated(binding=message["binding"], jig=message["jig"])


def _failure(error: object, host_root: str, relative: str) -> str:
    if not isinstance(error, dict):
        return "its evaluation failed"
    path = str(error.get("path", ""))
    message = str(error.get("message", ""))[: _QUOTE_CHARS * 2]
    if error.get("kind") == "export":
        # The refusal is prefixed with the Binding's own path: name only another file (jig.ts).
        return message if path == relative else f"{_host(host_root, path)}: {message}"
    where = _where(error, host_root) or _host(host_root, path)
    name = str(error.get("name", "Error"))
    return f"evaluating it threw {name} at {where}: {message}"


def _where(error: Mapping[str, object], host_root: str) -> str | None:
    """`file:line:column` of the error in the project, from Bun's position or stack."""
    position = error.get("position")
    if isinstance(position, dict) and isinstance(position.get("file"), str):
        found = _FRAME.search(f"{position['file']}:{position.get('line')}:{position.get('column')}")
        if found:
            return _place(host_root, found)
    stack = error.get("stack")
    for found in _FRAME.finditer(stack if isinstance(stack, str) else ""):
        if not found[1].startswith(SHIM_DIR + "/"):
            return _place(host_root, found)
    return None


def _place(host_root: str, found: re.Match[str]) -> str:
    column = f":{found[3]}" if found[3] else ""
    return f"{_host(host_root, found[1])}:{found[2]}{column}"


def _host(host_root: str, path: str) -> str:
    return f"{host_root.rstrip('/')}/{path}"


def check_listed(jig: object, binding_path: str, *, source: str, jig_source: str) -> None:
    """Refuse a Binding that the project's `jig.ts` does not list among its `bindings`."""
    if not isinstance(jig, dict):
        raise _refusal(jig_source, f"its defineJig(...) definition is {kind(jig)}, not an object")
    unknown = set(jig) - {"flows", "bindings"}
    if unknown:
        raise _refusal(jig_source, f"Jig definition has unknown field {sorted(unknown)[0]}")
    listed = jig.get("bindings")
    if isinstance(listed, dict) and listed.get("kind") == "discover":
        roots = [_normal(root) for root in listed.get("roots", []) if isinstance(root, str)]
        directory = binding_path.rpartition("/")[0]
        if any(root in ("", directory) or directory.startswith(root + "/") for root in roots):
            return
    elif isinstance(listed, list) and binding_path in {
        _normal(p) for p in listed if isinstance(p, str)
    }:
        return
    raise _refusal(
        source,
        f"it is not one of the project's Bindings: {jig_source} lists its bindings as "
        f"{_listing(listed)}, which does not include {binding_path!r}",
    )


def _normal(path: str) -> str:
    while path.startswith("./"):
        path = path[2:]
    return "" if path == "." else path.rstrip("/")


def _listing(listed: object) -> str:
    if isinstance(listed, dict) and isinstance(listed.get("roots"), list):
        return "discover(" + ", ".join(repr(root) for root in listed["roots"]) + ")"
    if isinstance(listed, list):
        return repr(listed)
    return "nothing" if listed is None else kind(listed)


def _refusal(source: str, reason: str) -> BindingError:
    return BindingError(
        reason + "; nothing was admitted", pointer="", rule="binding-script", source=source
    )
