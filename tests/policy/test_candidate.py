"""Every rule a candidate breaks, at once: the same rules as request validation, all listed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pathspec import GitIgnoreSpec

from jigcmd.contract import MAX_CANDIDATE_BYTES, MAX_FILES
from jigcmd.errors import JigError
from jigcmd.policy.binding import CommandPolicy
from jigcmd.policy.candidate import candidate_problems, exclude_pattern
from jigcmd.policy.imports import imported_closure, reached_marks
from jigcmd.policy.request import validate_request

TESTS = CommandPolicy(name="tests", kind="test", paths=("test/a.test.ts",))

# Paths from a small alphabet that reaches every path rule: grammar, reserved, collisions.
component = st.sampled_from(["a", "b", "src", "node_modules", ".git", ".x", "a b", "é", "-", "_"])
paths = st.lists(component, min_size=1, max_size=3).map("/".join)


@settings(max_examples=300, deadline=None)
@given(
    files=st.dictionaries(paths, st.text(max_size=40), max_size=70),
    with_test=st.booleans(),
    big=st.booleans(),
)
def test_no_problem_exactly_when_the_request_rules_accept(
    files: dict[str, str], with_test: bool, big: bool
) -> None:
    """The list is empty if and only if `validate_request` accepts the same files."""
    if with_test:
        files["test/a.test.ts"] = "test"
    if big and files:
        files[next(iter(files))] = "x" * (MAX_CANDIDATE_BYTES + 1)
    sizes = {path: len(text.encode()) for path, text in files.items()}
    problems = candidate_problems(sizes, needed=TESTS.paths, command="tests")
    refused: JigError | None = None
    try:
        validate_request({"command": "tests", "files": files}, {"tests": TESTS})
    except JigError as exc:
        refused = exc
    if refused is None:
        assert problems == []
    else:
        assert problems, f"validation refused ({refused.message}) but no problem was listed"
        rule = (refused.details or {}).get("rule")
        assert rule in {p.rule for p in problems}, (rule, problems)


def test_every_problem_is_listed_at_once_with_its_place_and_fix() -> None:
    """A bad name, a reserved directory, a collision, too many files, a missing test."""
    sizes = {f"src/f{i}.ts": 10 for i in range(MAX_FILES)}
    sizes |= {"src/a b.ts": 1, "lib/node_modules/x.ts": 1, "docs": 1, "docs/a.md": 1}
    problems = candidate_problems(
        sizes, not_text=["latin.txt"], needed=["test/a.test.ts"], command="tests"
    )
    assert [(p.path, p.rule) for p in problems] == [
        ("lib/node_modules/x.ts", "reserved-path"),
        ("src/a b.ts", "path-grammar"),
        ("latin.txt", "file-text"),
        ("docs", "path-collision"),
        ("", "files"),
        ("test/a.test.ts", "command-files"),
    ]
    by_rule = {p.rule: p for p in problems}
    assert (
        "rename it to src/a-b.ts, or leave it out with --exclude '/src/a b.ts'"
        in by_rule["path-grammar"].fix
    )
    assert "--exclude 'node_modules/'" in by_rule["reserved-path"].fix
    count = by_rule["files"]
    assert count.message == f"{MAX_FILES + 5} files, more than the {MAX_FILES} a candidate may hold"
    assert "--exclude GLOB" in count.fix
    assert by_rule["files"].line().startswith("the candidate: 69 files, more than the 64")


def test_the_count_fix_names_directories_the_command_never_imports() -> None:
    """Enough whole directories none of whose files the tests reach, fullest first."""
    sizes = {f"fixtures/f{i}.json": 1 for i in range(40)}
    sizes |= {f"docs/d{i}.md": 1 for i in range(20)} | {f"src/s{i}.ts": 1 for i in range(10)}
    sizes["test/a.test.ts"] = 1
    (problem,) = candidate_problems(sizes, needed=["test/a.test.ts"], reached=["src/s1.ts"])
    assert "--exclude '/fixtures/'" in problem.fix
    assert "docs/" not in problem.fix  # 71 - 40 = 31 files are within the limit already


def test_when_one_directory_holds_everything_the_fix_keeps_what_is_imported() -> None:
    """`--exclude '/src/*' --exclude '!/src/used.ts'`: the directory less the imported file."""
    sizes = {f"src/f{i}.ts": 1 for i in range(70)} | {"src/used.ts": 1, "a.test.ts": 1}
    (problem,) = candidate_problems(sizes, needed=["a.test.ts"], reached=["src/used.ts"])
    assert "--exclude '/src/*' --exclude '!/src/used.ts'" in problem.fix
    spec = GitIgnoreSpec.from_lines(["/src/*", "!/src/used.ts"])
    assert {p for p in sizes if not spec.match_file(p)} == {"src/used.ts", "a.test.ts"}


def test_when_the_spare_files_are_nested_the_fix_names_the_deeper_directory() -> None:
    """70 generated files in src/gen/, two imported from src/index.ts: `/src/gen/*` less
    those two, a set of excludes that works (`/src/*` could not re-include src/gen/m1.ts)."""
    sizes = {f"src/gen/m{i}.ts": 1 for i in range(1, 71)}
    sizes |= {"src/index.ts": 1, "test/big.test.ts": 1, "package.json": 1}
    reached = ["src/index.ts", "src/gen/m1.ts", "src/gen/m2.ts"]
    (problem,) = candidate_problems(sizes, needed=["test/big.test.ts"], reached=reached)
    globs = ["/src/gen/*", "!/src/gen/m1.ts", "!/src/gen/m2.ts"]
    assert " ".join(f"--exclude '{g}'" for g in globs) in problem.fix
    assert "(leaves out the 68 files of src/gen/ the command does not import)" in problem.fix
    spec = GitIgnoreSpec.from_lines(globs)
    left = {p for p in sizes if not spec.match_file(p)}
    assert set(reached) | {"test/big.test.ts"} <= left and len(left) <= MAX_FILES


def test_a_nested_directory_nothing_imports_is_left_out_whole() -> None:
    """No file to keep inside it: `--exclude '/a/b/'`, not `/a/b/*` with nothing kept."""
    sizes = {f"a/b/f{i}.ts": 1 for i in range(70)} | {"a/x.test.ts": 1}
    (problem,) = candidate_problems(sizes, needed=["a/x.test.ts"])
    assert "--exclude '/a/b/' (leaves out the 70 files of a/b/" in problem.fix


def test_files_that_are_not_text_count_in_the_fix_as_in_the_total() -> None:
    """73 text files and one Latin-1 one in test/: 74 files, and test/ holds 74, not 73."""
    sizes = {f"test/f{i}.txt": 1 for i in range(73)} | {"a.test.ts": 1}
    problems = candidate_problems(sizes, not_text=["test/l1.txt"], needed=["a.test.ts"])
    (count,) = [p for p in problems if p.rule == "files"]
    assert count.message.startswith("75 files, more than the 64")
    assert "--exclude '/test/' (test/ holds 74 files," in count.fix


def test_the_size_fix_names_only_the_files_that_matter_and_plurals_are_right() -> None:
    """One 300 KiB file is the whole problem: not a 37-byte one beside it; 1 file, not 1 files."""
    sizes = {"big.csv": 300_000, "package.json": 37, "a.test.ts": 1}
    (size,) = candidate_problems(sizes, needed=["a.test.ts"])
    assert size.fix.endswith(
        "the largest file that no command file imports, enough by itself: big.csv (300,000 bytes)"
    )
    sizes = {f"g/f{i}.ts": 1 for i in range(64)} | {"one/x.ts": 1, "a.test.ts": 1}
    (count,) = candidate_problems(
        sizes, needed=["a.test.ts"], reached=[f"g/f{i}.ts" for i in range(64)]
    )
    assert count.fix.endswith("g/ (64 files), one/ (1 file)")


@pytest.mark.parametrize("path", ["a b.ts", "x*y.ts", "it's.ts", "a[1].ts", "q?.ts", "back\\s"])
def test_an_exclude_pattern_matches_exactly_its_path(path: str) -> None:
    """Glob characters are escaped; the shell quoting survives a quote in the name."""
    quoted = exclude_pattern(path)
    assert quoted.startswith("'") and quoted.endswith("'")
    pattern = quoted[1:-1].replace("'\\''", "'")
    spec = GitIgnoreSpec.from_lines([pattern])
    assert spec.match_file(path)
    assert not spec.match_file("other.ts") and not spec.match_file(f"sub/{path}")


def test_imports_are_followed_through_relative_specifiers_only() -> None:
    """import/export from, dynamic import, require, index files, .js written for .ts."""
    files = {
        "test/a.test.ts": 'import { a } from "../src/a";\nimport "bun:test";\n',
        "src/a.ts": 'export * from "./b.js";\nconst c = await import("./c");\n',
        "src/b.ts": 'const d = require("./d/");\nimport x from "react";\n',
        "src/c.tsx": "",
        "src/d/index.ts": 'import "../../../outside";\n',
        "src/unused.ts": "",
    }
    assert imported_closure(files, ["test/a.test.ts"]) == {
        "test/a.test.ts",
        "src/a.ts",
        "src/b.ts",
        "src/c.tsx",
        "src/d/index.ts",
    }


@given(
    st.lists(st.sets(st.integers(0, 6)), min_size=7, max_size=7),
    st.lists(st.integers(0, 7), min_size=7, max_size=7),
    st.lists(st.integers(0, 7), max_size=7),
)
def test_one_walk_marks_each_root_with_what_its_own_closure_holds(
    edges: list[set[int]], bits: list[int], roots: list[int]
) -> None:
    """Cycles, shared imports, roots reached from earlier roots: the same as a closure each."""
    files = {f"f{i}.ts": "".join(f'import "./f{j}";\n' for j in sorted(edges[i])) for i in range(7)}
    marks = {f"f{i}.ts": bits[i] for i in range(7)}
    named = [f"f{i}.ts" for i in roots]  # f7.ts is not among the files
    reached = reached_marks(files, named, marks)
    closures = {root: imported_closure(files, [root]) for root in named}
    assert set(reached) == set().union(*closures.values())
    for root, closure in closures.items():
        union = 0
        for path in closure:
            union |= marks[path]
        assert reached.get(root, 0) == union
