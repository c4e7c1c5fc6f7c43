"""A project's `bunfig.toml`, which Bun under jigcmd never reads, said by what it sets.

Bun runs with `--config=/dev/null` (`planner.BUN_FLAGS`), so no setting of a project's
`bunfig.toml` applies. The note names the settings a command would have read (the file is
parsed as TOML: a commented-out key is none) and gives a fix only for what the file sets: a
`preload` (import the setup), a `[test] timeout` (a per-test timeout), a `[test] root` (bare
`bun test` runs only the files below it, while the Binding names its test files itself:
those outside it are named). `[install]` concerns nothing here (nothing is installed), so a
file holding only it gets no note. A file jigcmd cannot parse (not TOML, or nested past
Python's recursion limit) gets the note that none of it applies. Each key and the root are
the candidate's own text: quoted cut and with control characters escaped, the sentence
`bounded`. Pure: the candidate's files in, a sentence out.
"""

from __future__ import annotations

import posixpath
import tomllib
from collections.abc import Mapping, Sequence

from jigcmd.errors import bounded
from jigcmd.protocol.inert import one_line

__all__ = ["BUNFIG", "bunfig_note"]

BUNFIG = "bunfig.toml"
_WHERE = " (docs/binding.md#what-bun-runs-with)"
# How many settings, and test files outside `[test] root`, the note names before "and N more".
_NAMED = 4
# How many characters of a key or of `[test] root` the note quotes (the candidate's text).
_QUOTED = 80


def bunfig_note(
    files: Mapping[str, str], *, tests: bool = True, named: Sequence[str] = ()
) -> str | None:
    """The sentence for a `bunfig.toml` at the candidate's root, which Bun will not read:
    for a test command (`tests`; `named`, the test files the Binding names, checked against
    its `[test] root`), or for an entry point, which only its settings outside `[test]`
    concern (a project's usual `[test] preload` is none of its business); None when it sets
    nothing the command would read."""
    if BUNFIG not in files:
        return None
    said = (
        f"{BUNFIG}: Bun runs without it (jigcmd gives Bun --config=/dev/null, so no project "
        "can change Bun's own options)"
    )
    try:
        document = tomllib.loads(files[BUNFIG])
    except (ValueError, RecursionError):  # TOMLDecodeError, or nested past the stack
        return f"{said}: none of its settings apply (nor is it TOML jigcmd reads){_WHERE}"
    table = document.get("test")
    test = table if tests and isinstance(table, dict) else {}
    top = [key for key in document if key not in ("test", "install")]
    settings = [f"[test] {_quoted(key)}" for key in test] + [_quoted(key) for key in top]
    if not settings:
        return None
    fixes = []
    if "preload" in test or "preload" in top:
        where = "the test files that need it" if tests else "the entry point"
        fixes.append(f"import the setup it preloads from {where}")
    if "timeout" in test:
        fixes.append("give a slow test its own timeout, test()'s third argument")
    outside = _outside(test.get("root"), named)
    if outside:
        fixes.append(outside)
    fix = f"; {'; '.join(fixes)}" if fixes else ""
    kind = "" if tests else " for running a file"
    return bounded(f"{said}: its settings{kind} ({_some(settings)}) do not apply{fix}{_WHERE}")


def _outside(root: object, named: Sequence[str]) -> str:
    """The clause naming the test files of `named` outside `[test] root` (bare `bun test`
    never runs them); "" for none, or no root."""
    if not isinstance(root, str):
        return ""
    folder = posixpath.normpath(root.strip()).removeprefix("./").rstrip("/")
    if folder in ("", "."):
        return ""
    outside = [path for path in named if not path.startswith(folder + "/")]
    if not outside:
        return ""
    one = len(outside) == 1
    return (
        f'the Binding names the test files it runs, {_some(outside)} outside [test] root "'
        f'{_quoted(root)}" among them, which bare `bun test` never runs: take '
        f"{'it' if one else 'them'} out of the `test` list to run what bare `bun test` runs"
    )


def _quoted(text: str) -> str:
    """The candidate's `text`, cut to `_QUOTED` characters and made one inert line."""
    cut = text if len(text) <= _QUOTED else text[: _QUOTED - 1] + "…"
    return one_line(cut)


def _some(names: Sequence[str]) -> str:
    more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
    return ", ".join(names[:_NAMED]) + more
