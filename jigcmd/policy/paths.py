"""The grammars shared by the Binding and request validation: candidate paths and LocalNames.

The path grammar (spec-notes §3) excludes traversal, absolute paths, backslashes and every
shell metacharacter, so a path that passes can be joined under the candidate root as is.
A path refused for its characters is told all of them at once, with the nearest path the
grammar takes (`renamed_path`), so that no one renames one character per try; where several
are refused at once, no two are offered one name, nor one a file already has
(`distinct_renames`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator

from jigcmd.contract import LOCAL_NAME_MAX_CHARS, LOCAL_NAME_PATTERN, PATH_MAX_BYTES

__all__ = [
    "PATH_CHARACTERS",
    "PATH_CHARACTERS_SAID",
    "PATH_MAX_COMPONENTS",
    "RESERVED_COMPONENTS",
    "distinct_renames",
    "is_local_name",
    "path_problem",
    "renamed_path",
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
# How many different forbidden characters a refusal names, and how many places of each: a
# path of a thousand emoji is still one short sentence.
_NAMED_CHARACTERS = 4
# How far `distinct_renames` numbers a name before it offers none.
_NUMBERED = 100
_NAMED_PLACES = 3
# A run of hyphens, and a hyphen beside a dot: what a rename leaves of a space or an emoji.
_HYPHENS = re.compile("-{2,}")
_HYPHENS_BY_DOT = re.compile(r"-(?=\.)|(?<=\.)-")


def path_problem(path: str) -> str | None:
    """Return None if `path` obeys the path grammar, else the precise reason it does not."""
    # The checks run from the most telling to the most generic, so "../x" is reported as
    # traversal rather than as a bad first character.
    if not path:
        return "path must not be empty"
    if path.startswith("/"):
        return "path must be relative, not absolute (starts with '/')"
    forbidden = _forbidden_characters(path)
    if forbidden is not None:
        return f"path contains {forbidden}; allowed are {PATH_CHARACTERS_SAID}"
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


def _forbidden_characters(path: str) -> str | None:
    """`forbidden character 'é' (U+00E9) at index 4`, or for more than one `3 forbidden
    characters: 'é' (U+00E9) at indexes 4 and 13, ' ' (U+0020) at index 12` (the first few
    different ones, where each is, the rest counted); None when there is none."""
    places: dict[str, list[int]] = {}
    for index, char in enumerate(path):
        if char not in _ALLOWED:
            places.setdefault(char, []).append(index)
    if not places:
        return None
    named = [
        f"{char!r} (U+{ord(char):04X}) at {_places(at)}"
        for char, at in list(places.items())[:_NAMED_CHARACTERS]
    ]
    others = len(places) - _NAMED_CHARACTERS
    if others > 0:
        named.append(f"and {others} other character{'s' if others != 1 else ''}")
    count = sum(len(at) for at in places.values())
    if count == 1:
        return f"forbidden character {named[0]}"
    return f"{count} forbidden characters: {', '.join(named)}"


def _places(indexes: list[int]) -> str:
    """`index 4`, `indexes 4 and 13`, `indexes 1, 2, 3 and 5 more`."""
    if len(indexes) == 1:
        return f"index {indexes[0]}"
    shown = [str(index) for index in indexes[:_NAMED_PLACES]]
    if len(indexes) > _NAMED_PLACES:
        shown.append(f"{len(indexes) - _NAMED_PLACES} more")
    return f"indexes {', '.join(shown[:-1])} and {shown[-1]}"


def renamed_path(path: str) -> str | None:
    """The path nearest `path` that the grammar takes (`données/menu é.txt` →
    `donnees/menu-e.txt`, `émoji-🚀.test.ts` → `emoji.test.ts`): accents dropped, every other
    character a path may not hold a hyphen, none doubled, beside a dot or at either end of
    a component; None when that is still no path (`../x`, a name of emoji only) or one in a
    reserved directory (`x/.jig /z.ts` → `x/.jig/z.ts`), which a candidate never sends."""
    parts = []
    for part in path.split("/"):
        decomposed = unicodedata.normalize("NFKD", part)
        kept = "".join(
            c if c in _ALLOWED else "-" for c in decomposed if not unicodedata.combining(c)
        )
        parts.append(_HYPHENS_BY_DOT.sub("", _HYPHENS.sub("-", kept)).strip("-"))
    renamed = "/".join(parts)
    if path_problem(renamed) is not None or reserved_component(renamed) is not None:
        return None
    return renamed


def distinct_renames(paths: Iterable[str], taken: Iterable[str]) -> dict[str, str | None]:
    """`renamed_path` of each of `paths`, in order, made distinct from `taken` (the files
    sent) and from the earlier ones: `src/a b.ts`, `src/a!b.ts` → `src/a-b.ts`,
    `src/a-b-2.ts`; None where there is no such name."""
    used = set(taken)
    renames: dict[str, str | None] = {}
    for path in paths:
        renamed = renamed_path(path)
        if renamed is not None:
            renamed = next(
                (name for name in _numbered(renamed) if name not in used and _takes(name)), None
            )
        if renamed is not None:
            used.add(renamed)
        renames[path] = renamed
    return renames


def _numbered(path: str) -> Iterator[str]:
    """`path`, then `-2` … `-99` before its name's first dot (`x.test.ts` → `x-2.test.ts`)."""
    yield path
    directory, _, name = path.rpartition("/")
    stem, dot, suffix = name.partition(".")
    for number in range(2, _NUMBERED):
        yield f"{directory}{'/' if directory else ''}{stem}-{number}{dot}{suffix}"


def _takes(path: str) -> bool:
    return path_problem(path) is None and reserved_component(path) is None


def reserved_component(path: str) -> str | None:
    """Return the first reserved directory component of `path` (`node_modules`, `.git`, `.jig`)."""
    for component in path.split("/"):
        if component in RESERVED_COMPONENTS:
            return component
    return None


def is_local_name(name: str) -> bool:
    """Whether `name` is a LocalName: lowercase words joined by single hyphens, ≤ 64 characters."""
    return len(name) <= LOCAL_NAME_MAX_CHARS and _LOCAL_NAME.fullmatch(name) is not None
