"""The shared path and LocalName grammars (spec-notes §3)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jigcmd.contract import PATH_PATTERN
from jigcmd.policy.paths import is_local_name, path_problem, renamed_path, reserved_component

component = st.from_regex(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]{0,10}\Z").filter(
    lambda c: c not in {".", ".."}
)
valid_paths = st.lists(component, min_size=1, max_size=16).map("/".join)


@given(valid_paths)
def test_paths_built_from_plain_components_are_accepted(path: str) -> None:
    """Up to 16 components of allowed characters, none '.' or '..', is a valid path."""
    assert path_problem(path) is None


@given(st.text(max_size=40))
def test_every_accepted_path_satisfies_the_whole_grammar(path: str) -> None:
    """Anything accepted matches the pattern, the byte and component limits and has no dot parts."""
    if path_problem(path) is None:
        components = path.split("/")
        assert re.fullmatch(PATH_PATTERN, path)
        assert len(path.encode()) <= 256
        assert len(components) <= 16
        assert not {"", ".", ".."} & set(components)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "must not be empty"),
        ("/tmp/bad.ts", "must be relative"),
        ("../bad.ts", "'..' components"),
        ("src/../../x.ts", "'..' components"),
        ("./x.ts", "'.' components"),
        ("src//x.ts", "empty components"),
        ("src/", "empty components"),
        ("src\\x.ts", "forbidden character '\\\\'"),
        ("a b.ts", "forbidden character ' '"),
        ("x.ts;rm", "forbidden character ';'"),
        ("é.ts", "forbidden character 'é'"),
        ("-x.ts", "must start with an ASCII letter, digit or '_'"),
        (".env", "must start with an ASCII letter, digit or '_'"),
        ("a" * 257, "257 bytes, more than 256"),
        ("/".join(["a"] * 17), "17 components, more than 16"),
    ],
)
def test_invalid_paths_are_rejected_with_the_precise_reason(path: str, reason: str) -> None:
    """Each grammar violation is named."""
    problem = path_problem(path)
    assert problem is not None
    assert reason in problem


def test_limits_are_inclusive() -> None:
    """Exactly 256 bytes and exactly 16 components are allowed."""
    assert path_problem("a" * 256) is None
    assert path_problem("/".join(["a"] * 16)) is None


def test_every_forbidden_character_is_named_within_a_bound() -> None:
    """Each different character with its places, the first four named and the rest counted,
    so a path of many is one short sentence and one rename, not one try per character."""
    problem = path_problem("a b c\u00e9\u00e8\u00ea\u00eb\u00ef.ts")
    assert problem == (
        "path contains 7 forbidden characters: ' ' (U+0020) at indexes 1 and 3, 'é' (U+00E9) "
        "at index 5, 'è' (U+00E8) at index 6, 'ê' (U+00EA) at index 7, and 2 other characters; "
        "allowed are ASCII letters, digits, '_', '.', '/' and '-'"
    )
    many = path_problem("\U0001f680" * 1000)
    assert many is not None and "indexes 0, 1, 2 and 997 more" in many and len(many) < 200


@pytest.mark.parametrize(
    ("path", "renamed"),
    [
        ("données/menu é.txt", "donnees/menu-e.txt"),
        ("a  b\u00a0c.ts", "a-b-c.ts"),
        ("src/\U0001f680 launch.ts", "src/launch.ts"),
        ("../é.ts", None),  # still no path
        ("\U0001f680/x.ts", None),  # an empty component
    ],
)
def test_a_path_refused_for_its_characters_has_a_whole_name(path: str, renamed: str | None) -> None:
    """Accents dropped, any other character a hyphen; the name always passes the grammar."""
    assert renamed_path(path) == renamed


def test_dotfiles_below_the_root_are_allowed_by_the_grammar() -> None:
    """Only the first character is restricted, so src/.env is a grammatical path."""
    assert path_problem("src/.env") is None


@pytest.mark.parametrize(
    ("path", "reserved"),
    [
        ("node_modules/a.ts", "node_modules"),
        ("src/.git/config", ".git"),
        ("a/.jig", ".jig"),
        ("src/node_modules_x/a.ts", None),
        ("src/a.git", None),
    ],
)
def test_reserved_components_are_found_at_any_depth(path: str, reserved: str | None) -> None:
    """Reserved directory names are matched as whole components only."""
    assert reserved_component(path) == reserved


@pytest.mark.parametrize("name", ["cli", "a", "run-tests", "x1-2y", "a" * 64])
def test_local_names_are_accepted(name: str) -> None:
    """Lowercase alphanumeric words joined by single hyphens are LocalNames."""
    assert is_local_name(name)


@pytest.mark.parametrize("name", ["", "Cli", "-a", "a-", "a--b", "a_b", "a.b", "a" * 65, "a\n"])
def test_non_local_names_are_rejected(name: str) -> None:
    """Uppercase, leading/trailing/double hyphens, other characters and long names are not."""
    assert not is_local_name(name)
