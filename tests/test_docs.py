"""The README is a landing page and the reference lives in docs/: every link resolves.

A link is checked the way GitHub renders it: a relative path must name a file of the
checkout, and a `#fragment` must be the slug of a heading in that file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = sorted((REPO / "docs").glob("*.md"))
README_MAX_BYTES = 12 * 1024

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.M)


def links(path: Path) -> list[str]:
    """Every Markdown link target of `path`, code blocks left out."""
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return _LINK.findall(text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of every heading in `path` (duplicates get GitHub's -1, -2 suffixes)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def test_the_readme_is_a_landing_page_of_at_most_12_kib() -> None:
    """The reference is in docs/; the README stays short enough to read at once."""
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size:,} bytes, over {README_MAX_BYTES:,}"


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_names_a_file_and_a_heading_that_exist(page: Path) -> None:
    """No dangling link: the file is in the checkout and the fragment is one of its headings."""
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:: not ours to check offline
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file):
            broken.append(f"{target}: no heading '#{fragment}' in {file.name}")
    assert broken == []


def test_every_docs_page_is_linked_from_the_readme() -> None:
    """Every moved section is reachable: the README links each page of docs/."""
    linked = {(REPO / t.partition("#")[0]).resolve() for t in links(README) if t[:1] != "#"}
    missing = [p.name for p in PAGES if p.resolve() not in linked]
    assert missing == []


def test_the_slug_is_githubs() -> None:
    """The anchors GitHub renders for the headings this repository links to."""
    assert slug("jarvis: commands over loopback HTTP") == "jarvis-commands-over-loopback-http"
    assert slug("Embedding jigcmd") == "embedding-jigcmd"
    assert slug("A directory as the candidate: `--files DIR`") == (
        "a-directory-as-the-candidate---files-dir"
    )


def test_no_page_installs_jigcmd_from_pypi_where_it_is_not() -> None:
    """jigcmd is not published: the pages install a checkout or the wheel built from it."""
    for page in [README, *PAGES]:
        assert re.search(r"pip install jigcmd\b", page.read_text(encoding="utf-8")) is None, page
    assert "`pip wheel --no-deps .`" in README.read_text(encoding="utf-8")


def test_every_shell_script_a_page_names_is_in_the_repository() -> None:
    """A `name.sh` in backticks (a repro, a script to run) is a file of the checkout."""
    shipped = {path.name for path in REPO.rglob("*.sh") if ".venv" not in path.parts}
    for page in [README, *PAGES]:
        for named in re.findall(r"`(?:[\w./-]*/)?([\w.-]+\.sh)`", page.read_text(encoding="utf-8")):
            assert named in shipped, f"{page.name} names {named}, which is not in the checkout"


def test_development_md_says_what_quick_selects_as_the_script_does() -> None:
    """The marker expression `--quick` passes, as scripts/test.sh has it; no test count to
    drift (the suite grows)."""
    script = (REPO / "scripts" / "test.sh").read_text(encoding="utf-8")
    (selected,) = re.findall(r'quick=\(-m "([^"]+)"\)', script)
    page = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    assert f'`--quick` is `-m "{selected}"`' in page
    assert re.search(r"\(\d[\d,]* tests\)", page) is None
