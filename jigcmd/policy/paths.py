"""The grammars shared by the Binding and request validation: candidate paths and LocalNames.

The path grammar (spec-notes §3) excludes traversal, absolute paths, backslashes and every
shell metacharacter, so a path that passes can be joined under the candidate root as is.
"""

from __future__ import annotations

import re

from jigcmd.contract import LOCAL_NAME_MAX_CHARS, LOCAL_NAME_PATTERN, PATH_MAX_BYTES

__all__ = [
    "PATH_CHARACTERS",
    "PATH_CHARACTERS_SAID",
    "PATH_MAX_COMPONENTS",
    "RESERVED_COMPONENTS",
    "is_local_name",
    "path_problem",
    "reserved_component",
]

PATH_MAX_COMPONENTS = 16

# Directories a candidate may not supply: they would smuggle dependencies, history or host state.
RESERVED_COMPONENTS = frozenset({"node_modules", ".git", ".jig"})

_ALLOWED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./-")
# The characters a path may hold, as a set and in words.
PATH_CHARACTERS = _ALLOWED
PATH_CHARACTERS_SAID = "ASCII letters, digits, '_', '.', '/' and '-'"
_FIRST = _ALLOWED - frozenset("./-")
_LOCAL_NAME = re.compile(LOCAL_NAME_PATTERN)


def path_problem(path: str) -> str | None:
    """Return None if `path` obeys the path grammar, else the precise reason it does not."""
    # The checks run from the most telling to the most generic, so "../x" is reported as
    # traversal rather than as a bad first character.
    if not path:
        return "path must not be empty"
    if path.startswith("/"):
        return "path must be relative, not absolute (starts with '/')"
    for index, char in enumerate(path):
        if char not in _ALLOWED:
            return (
                f"path contains forbidden character {char!r} (U+{ord(char):04X}) at index {index}; "
                f"allowed are {PATH_CHARACTERS_SAID}"
            )
    if len(path) > PATH_MAX_BYTES:  # ASCII only by now, so characters are bytes
        return f"path is {len(path)} bytes, more than {PATH_MAX_BYTES}"
    components = path.split("/")
    if ".." in components:
        return "path must not contain '..' components"
    if "." in components:
        return "path must not contain '.' components"
    if "" in components:
        return "path must not contain empty components ('//' or a trailing '/')"
    if len(components) > PATH_MAX_COMPONENTS:
        return f"path has {len(components)} components, more than {PATH_MAX_COMPONENTS}"
    if path[0] not in _FIRST:
        return f"path must start with an ASCII letter, digit or '_', not {path[0]!r}"
    return None


def reserved_component(path: str) -> str | None:
    """Return the first reserved directory component of `path` (`node_modules`, `.git`, `.jig`)."""
    for component in path.split("/"):
        if component in RESERVED_COMPONENTS:
            return component
    return None


def is_local_name(name: str) -> bool:
    """Whether `name` is a LocalName: lowercase words joined by single hyphens, ≤ 64 characters."""
    return len(name) <= LOCAL_NAME_MAX_CHARS and _LOCAL_NAME.fullmatch(name) is not None
