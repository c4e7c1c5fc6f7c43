"""Finding which left-out entry a relative import names reads each specifier once: the work
grows with the text, however many parts one specifier has."""

from __future__ import annotations

from collections.abc import Iterator, Set
from pathlib import Path

from jigcmd.policy.imports import left_out_imports
from tests.command.test_scaffold import project
from tests.frontends.test_init import jigcmd
from tests.gitrepo import git


class _Counted(Set[str]):
    """A set of left-out entries that counts the characters of every path looked up in it."""

    def __init__(self, entries: Set[str]) -> None:
        self._entries = frozenset(entries)
        self.looked_up = 0

    def __contains__(self, item: object) -> bool:
        self.looked_up += len(item) if isinstance(item, str) else 1
        return item in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def test_a_specifier_of_many_parts_is_looked_up_in_time_linear_in_its_length() -> None:
    """`./a/a/…/x` (5,000 parts) with `dist/` left out: the paths looked up among the
    entries add up to a bounded multiple of the text, not a prefix per part (25 million
    characters where each prefix was built and looked up)."""
    text = 'import x from "./' + "a/" * 5_000 + 'x";\nconsole.log(1);\n'
    entries = _Counted({"dist/", "dist/x.js"})
    assert left_out_imports({"src/cli.ts": text}, entries) == {}
    assert 0 < entries.looked_up <= 20 * len(text)


def test_the_deepest_specifier_still_finds_the_shortest_left_out_directory_above_it() -> None:
    """A directory entry anywhere along the path is found, the outermost first."""
    text = 'import x from "../dist/' + "a/" * 5_000 + 'x";\n'
    files = {"src/cli.ts": text}
    found = left_out_imports(files, frozenset({"dist/a/a/", "dist/"}))
    assert list(found) == ["dist/"]
    assert found["dist/"][0] == "src/cli.ts"
    assert left_out_imports(files, frozenset({"dist/a/a/"})).keys() == {"dist/a/a/"}
    assert left_out_imports(files, frozenset({"dist/b/"})) == {}


def test_init_names_an_ignored_directory_imported_by_a_long_specifier_in_a_bounded_note(
    tmp_path: Path,
) -> None:
    """The reviewer's shape, turned into `dist/`: init names the import and the `--exclude`,
    and the imported path it quotes is cut, not 20,000 characters of it."""
    root = project(
        tmp_path / "app",
        {
            ".gitignore": "dist/\n",
            "dist/x.js": "x\n",
            "package.json": '{"name": "app"}',
            "src/cli.ts": 'import x from "../dist/' + "a/" * 10_000 + 'x";\nconsole.log(x);\n',
            "test/cli.test.ts": 'import "../src/cli";\n',
        },
    )
    git(root, "init", "-q")
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    note = next(line for line in done.stderr.splitlines() if "left out of the candidate" in line)
    assert "dist/ (.gitignore; src/cli.ts imports dist/a/a/" in note
    assert "bring it back with --exclude '!/dist/')" in note
    assert len(note) < 2_000
