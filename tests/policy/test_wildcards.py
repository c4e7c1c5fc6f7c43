"""Workspace globs and tsconfig.json `paths` keys, matched without backtracking. Pure."""

from __future__ import annotations

import pytest

from jigcmd.policy.wildcards import Glob, wildcard_matches


@pytest.mark.parametrize(
    ("glob", "directory", "matches"),
    [
        ("apps/*", "apps/cli", True),
        ("apps/*", "apps/cli/sub", False),
        ("apps/*", "apps", False),
        ("packages/**", "packages/a/b", True),
        ("packages/**", "packages", False),  # a last `**` names what is below, as in Bun
        ("**", "a", True),
        ("a/**/b", "a/b", True),  # elsewhere it may be no directory at all
        ("**/pkg", "pkg", True),
        ("**/pkg", "a/b/pkg", True),
        ("a/**/b/**/c", "a/x/b/y/z/c", True),
        ("a/**/b/**/c", "a/x/c", False),
        ("pkg-?", "pkg-a", True),
        ("pkg-?", "pkg-ab", False),
        ("*-ui", "web-ui", True),
        ("*a*b", "xaxb", True),
        ("*a*b", "xaxbx", False),
        ("p**", "p/q", False),  # `**` inside a name is a star of that name only
        ("?", "", False),
    ],
)
def test_a_glob_is_matched_segment_by_segment_as_bun_does(
    glob: str, directory: str, matches: bool
) -> None:
    """`*` and `?` within one name, a `**` segment any run of names (one at least, last)."""
    assert Glob.of(glob.split("/")).matches(directory.split("/")) is matches


@pytest.mark.parametrize(
    ("key", "name", "matches"),
    [
        ("@mono/*", "@mono/core", True),
        ("@mono/*", "@mono/core/deep", True),  # a star crosses `/` in a paths key
        ("@mono/*", "@other/core", False),
        ("zod", "zod", True),
        ("zod", "zo", False),
        ("a*b*c", "abc", True),
        ("a*b*c", "acb", False),
        ("a?c", "abc", False),  # `?` is itself in a paths key
        ("a?c", "a?c", True),
        ("ab*ba", "aba", False),  # the ends never overlap
    ],
)
def test_a_star_is_any_run_of_characters(key: str, name: str, matches: bool) -> None:
    """Literal but for `*`; the pieces are placed in order, the ends anchored."""
    assert wildcard_matches(key, name) is matches


def test_a_glob_whose_pieces_cannot_all_fit_is_refused_before_any_is_placed() -> None:
    """`*a` fourteen times then `b` against forty `a`s (exponential for a regular expression):
    refused by the last piece, as a glob twice as long as the name is by its length."""
    assert not wildcard_matches("*a" * 14 + "b", "a" * 40, any_one=True)
    assert not Glob.of(["*a" * 14 + "b"]).matches(["a" * 40])
    assert not Glob.of(["*a?" * 30]).matches(["a" * 40])
    assert wildcard_matches("*a?" * 13, "a" * 40, any_one=True)
