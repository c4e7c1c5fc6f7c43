"""A project directory read as a candidate: what git ignores, what can never be sent, the note."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pytest

from jigcmd.command import projectdir
from jigcmd.command.gitignore import MAX_PATTERN_BYTES
from jigcmd.command.projectdir import (
    BINARY,
    DOT,
    EXCLUDED,
    GITIGNORED,
    INFO_EXCLUDED,
    RESERVED,
    SPECIAL,
    CandidateError,
    read_project,
)
from jigcmd.contract import MAX_CANDIDATE_BYTES

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"


def tree(root: Path, files: dict[str, str | bytes]) -> Path:
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    return root


def test_a_bun_project_sends_its_sources_and_names_what_it_left_out(tmp_path: Path) -> None:
    """.git, node_modules, the top dotfiles, ignored and binary files: out, each said why."""
    root = tree(
        tmp_path,
        {
            ".git/HEAD": "ref: refs/heads/main\n",
            ".gitignore": "node_modules\ndist/\n*.log\n",
            ".vscode/settings.json": "{}",
            "node_modules/@types/bun/index.d.ts": "export {}",
            "dist/index.js": "x",
            "debug.log": "x",
            "logo.png": PNG,
            "package.json": "{}",
            "index.ts": "console.log(1)",
            "src/.hidden.ts": "export {}",
        },
    )
    project = read_project(root)
    assert sorted(project.files) == ["index.ts", "package.json", "src/.hidden.ts"]
    assert project.left_out == {
        RESERVED: [".git/", "node_modules/"],
        DOT: [".gitignore", ".vscode/"],
        GITIGNORED: ["debug.log", "dist/"],
        BINARY: ["logo.png"],
    }
    assert project.problems() == []
    note = project.note()
    assert note is not None and "\n" not in note
    assert note.startswith("left out of the candidate: .git/, node_modules/ (never part of")
    assert "logo.png (binary)" in note and note.endswith("; the candidate: 3 files, 25 bytes")


def test_nothing_left_out_means_no_note(tmp_path: Path) -> None:
    """A directory of plain sources is sent as it is, silently."""
    project = read_project(tree(tmp_path, {"a.ts": "1", "test/a.test.ts": "2"}))
    assert project.note() is None and sorted(project.files) == ["a.ts", "test/a.test.ts"]


@pytest.mark.parametrize(
    ("ignore", "expected"),
    [
        # A pattern without a slash matches at any depth; `!` re-includes.
        ("*.log\n!keep.log\n", {"a.ts", "keep.log", "src/keep.log", "src/b.ts", "src/gen/c.ts"}),
        # A leading slash anchors to the .gitignore's own directory.
        ("/a.ts\n", {"debug.log", "keep.log", "src/b.ts", "src/gen/c.ts", "src/keep.log"}),
        # A trailing slash matches directories only, and nothing under them comes back.
        ("gen/\n!src/gen/c.ts\n", {"a.ts", "debug.log", "keep.log", "src/b.ts", "src/keep.log"}),
        # `**` spans directories.
        ("src/**/*.ts\n", {"a.ts", "debug.log", "keep.log", "src/keep.log"}),
        # Comments and blank lines are nothing; an escaped `#` is a name.
        (
            "# all\n\n\\#x\n",
            {"a.ts", "debug.log", "keep.log", "src/b.ts", "src/gen/c.ts", "src/keep.log"},
        ),
    ],
)
def test_gitignore_patterns_mean_what_git_means(
    tmp_path: Path, ignore: str, expected: set[str]
) -> None:
    """Anchoring, directory-only patterns, negation, `**`, comments, as git reads them."""
    files = {"a.ts": "1", "debug.log": "x", "keep.log": "k", "src/b.ts": "2", "src/keep.log": "k"}
    root = tree(tmp_path, {**files, "src/gen/c.ts": "3", ".gitignore": ignore})
    assert set(read_project(root).files) == expected


def test_a_deeper_gitignore_overrides_a_shallower_one(tmp_path: Path) -> None:
    """src/.gitignore re-includes what the root's ignores, for its own directory only."""
    root = tree(
        tmp_path,
        {
            ".gitignore": "*.json\n",
            "src/.gitignore": "!*.json\n",
            "a.json": "{}",
            "src/b.json": "{}",
        },
    )
    project = read_project(root)
    assert set(project.files) == {"src/.gitignore", "src/b.json"}
    assert project.left_out[GITIGNORED] == ["a.json"]


def test_a_project_inside_a_work_tree_obeys_the_gitignores_above_it(tmp_path: Path) -> None:
    """Its repository's root .gitignore and info/exclude apply, relative to where they are."""
    repo = tree(
        tmp_path,
        {
            ".git/info/exclude": "*.tmp\n",
            ".gitignore": "packages/app/build/\n*.secret\n",
            "packages/app/index.ts": "1",
            "packages/app/build/out.js": "x",
            "packages/app/key.secret": "x",
            "packages/app/scratch.tmp": "x",
        },
    )
    project = read_project(repo / "packages" / "app")
    assert set(project.files) == {"index.ts"}
    assert sorted(project.left_out[GITIGNORED]) == ["build/", "key.secret"]
    assert project.left_out[INFO_EXCLUDED] == ["scratch.tmp"]


def test_exclude_takes_gitignore_patterns_negation_included(tmp_path: Path) -> None:
    """--exclude 'src/*' --exclude '!src/keep.ts': everything of src/ but that file."""
    root = tree(tmp_path, {"a.ts": "1", "src/keep.ts": "2", "src/x.ts": "3", "src/y.ts": "4"})
    project = read_project(root, ["/src/*", "!/src/keep.ts"])
    assert set(project.files) == {"a.ts", "src/keep.ts"}
    assert project.left_out[EXCLUDED] == ["src/x.ts", "src/y.ts"]


def test_a_symlink_is_left_out_and_never_followed(tmp_path: Path) -> None:
    """A link (to a file inside or anywhere outside) is not candidate text."""
    outside = tmp_path / "outside.ts"
    outside.write_text("secret")
    root = tree(tmp_path / "p", {"a.ts": "1"})
    (root / "link.ts").symlink_to(outside)
    (root / "dir").symlink_to(tmp_path)
    project = read_project(root)
    assert set(project.files) == {"a.ts"}
    assert project.left_out[SPECIAL] == ["dir", "link.ts"]


def test_text_that_is_not_utf8_and_oversized_files_are_problems_not_silence(
    tmp_path: Path,
) -> None:
    """Latin-1 text and a file over 256 KiB would be sent: each is a problem with its fix."""
    root = tree(tmp_path, {"a.ts": "1", "latin.txt": "caf\xe9".encode("latin-1")})
    (root / "big.json").write_text("x" * (MAX_CANDIDATE_BYTES + 1))
    project = read_project(root)
    rules = {(p.path, p.rule) for p in project.problems()}
    assert ("latin.txt", "file-text") in rules
    assert ("", "candidate-size") in rules
    size = next(p for p in project.problems() if p.rule == "candidate-size")
    assert "big.json (262,145 bytes)" in size.fix and "--exclude '/big.json'" in size.fix


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: None, "no such directory"),
        (lambda p: p.write_text("x"), "not a directory"),
    ],
)
def test_a_missing_directory_or_a_file_is_refused_by_name(
    tmp_path: Path, make: object, message: str
) -> None:
    """--files names a directory that exists."""
    path = tmp_path / "project"
    make(path)  # type: ignore[operator]
    with pytest.raises(CandidateError, match=message):
        read_project(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any directory")
def test_an_unreadable_directory_is_refused_not_skipped(tmp_path: Path) -> None:
    """A directory that cannot be listed would silently drop files: it is an error."""
    root = tree(tmp_path, {"a.ts": "1", "locked/b.ts": "2"})
    (root / "locked").chmod(0)
    try:
        with pytest.raises(CandidateError, match="cannot be read"):
            read_project(root)
    finally:
        (root / "locked").chmod(0o755)


def swap_at(monkeypatch: pytest.MonkeyPatch, name: str, swap: Callable[[], None]) -> None:
    """Run `swap` once, when the walk has listed `name` and is about to open it."""

    def listed(path: PurePosixPath) -> None:
        if path.as_posix() == name:
            swap()

    monkeypatch.setattr(projectdir, "_listed", listed)


def test_a_file_swapped_for_a_symlink_after_the_listing_is_refused_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("root only\n")
    root = tree(tmp_path / "p", {"index.ts": "x", "src/data.txt": "harmless\n"})
    data = root / "src/data.txt"

    def swap() -> None:
        data.unlink()
        data.symlink_to(secret)

    swap_at(monkeypatch, "src/data.txt", swap)
    with pytest.raises(CandidateError) as refused:
        read_project(root)
    assert str(refused.value).startswith(f"{data}: changed while it was read")


def test_a_directory_swapped_for_a_symlink_after_the_listing_is_refused_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tree(tmp_path / "outside", {"secret.ts": "root only"})
    root = tree(tmp_path / "p", {"index.ts": "x", "src/a.ts": "y"})

    def swap() -> None:
        (root / "src/a.ts").unlink()
        (root / "src").rmdir()
        (root / "src").symlink_to(outside)

    swap_at(monkeypatch, "src", swap)
    with pytest.raises(CandidateError) as refused:
        read_project(root)
    assert str(refused.value).startswith(f"{root / 'src'}: changed while it was read")


def test_a_file_swapped_for_a_fifo_after_the_listing_is_refused_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tree(tmp_path, {"index.ts": "x"})

    def swap() -> None:
        (root / "index.ts").unlink()
        os.mkfifo(root / "index.ts")

    swap_at(monkeypatch, "index.ts", swap)
    with pytest.raises(CandidateError, match="changed while it was read"):
        read_project(root)


def test_a_file_that_grows_past_the_bound_after_the_listing_is_oversized(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tree(tmp_path, {"index.ts": "x", "big.ts": "y"})

    def grow() -> None:
        (root / "big.ts").write_text("z" * (MAX_CANDIDATE_BYTES + 10))

    swap_at(monkeypatch, "big.ts", grow)
    assert read_project(root).oversized == {"big.ts": MAX_CANDIDATE_BYTES + 10}


def test_a_gitignore_that_is_a_fifo_or_a_symlink_is_not_read(tmp_path: Path) -> None:
    """As git (2.32 on): neither is followed or waited on; the project reads as if it had none."""
    root = tree(
        tmp_path / "project", {"a.ts": "1", "debug.log": "x", "src/b.ts": "2", "src/c.log": "y"}
    )
    os.mkfifo(root / ".gitignore")
    outside = tmp_path / "patterns"
    outside.write_text("*.log\n")
    (root / "src" / ".gitignore").symlink_to(outside)
    project = read_project(root)
    assert set(project.files) == {"a.ts", "debug.log", "src/b.ts", "src/c.log"}


def test_a_gitignore_past_its_size_bound_is_refused_naming_it(tmp_path: Path) -> None:
    """Never read into memory whole: the project is refused, the file named."""
    root = tree(tmp_path, {"a.ts": "1", ".gitignore": "#" * (MAX_PATTERN_BYTES + 1)})
    with pytest.raises(CandidateError, match=r"\.gitignore: cannot be read: larger than"):
        read_project(root)


def test_the_note_counts_the_files_as_the_refusal_does(tmp_path: Path) -> None:
    """A file that is not text is counted in the note as in `the candidate: N files`, and the
    note does not say "sending" of a candidate that may yet be refused."""
    (tmp_path / "a.ts").write_text("x")
    (tmp_path / "l1.txt").write_bytes(b"caf\xe9\n")
    (tmp_path / ".env").write_text("K=v")
    project = read_project(tmp_path)
    note = project.note()
    assert note is not None and note.endswith("; the candidate: 2 files, 1 byte")
    assert "sending" not in note
