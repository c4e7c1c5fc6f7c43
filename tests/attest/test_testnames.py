"""A signed test result's names: each test's path joined so that it splits back exactly."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jigcmd.attest.testnames import joined, split

# The characters the escaping is about, and a few that it leaves alone.
_PARTS = st.lists(st.text(alphabet=" >\\ab\n", max_size=8), min_size=1, max_size=5)


@given(_PARTS)
def test_every_path_splits_back_exactly(parts: list[str]) -> None:
    """Whatever a file, describe or test name holds, the name gives its path back."""
    assert split(joined(parts)) == parts


@given(_PARTS, _PARTS)
def test_two_paths_never_share_a_name(first: list[str], second: list[str]) -> None:
    """Distinct paths are distinct names: no test is mistaken for another."""
    assert (joined(first) == joined(second)) == (first == second)


def test_a_name_without_separators_or_escapes_reads_as_bun_shows_it() -> None:
    """The common name is the plain join; a line break is kept, not cut."""
    assert joined(["test/a.test.ts", "math", "adds => 2"]) == "test/a.test.ts > math > adds => 2"
    assert joined(["f.ts", "rows(a\nb)"]) == "f.ts > rows(a\nb)"


def test_a_describe_holding_the_separator_is_told_from_two_describes() -> None:
    """`a > b` is escaped; `a`, `b` is the plain join; a backslash before `>` is doubled."""
    assert joined(["f.ts", "a > b", "c"]) == "f.ts > a \\> b > c"
    assert joined(["f.ts", "a", "b", "c"]) == "f.ts > a > b > c"
    assert joined(["f.ts", "x >", "> y"]) == "f.ts > x \\> > \\> y"
    assert joined(["f.ts", "a\\>b", "c\\d"]) == "f.ts > a\\\\>b > c\\d"
