"""Git's index read by our own parser: what real git writes, in every format, and damage."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from jigcmd.command.gitindex import IndexFormatError, find_repository, parse_index
from tests.gitrepo import git


def repository(root: Path, *config: str, init: tuple[str, ...] = ()) -> Path:
    """A work tree with three files added (and a symlink), `config` set before the add."""
    root.mkdir()
    git(root, "init", "-q", *init)
    for pair in config:
        git(root, "config", *pair.split("="))
    (root / "src" / "deep").mkdir(parents=True)
    for name in ("a.ts", "src/b.ts", "src/deep/c.ts"):
        (root / name).write_text("1\n")
    (root / "link").symlink_to("a.ts")
    git(root, "add", ".")
    return root


@pytest.mark.parametrize(
    ("config", "init"),
    [
        ((), ()),
        (("index.version=3",), ()),
        (("index.version=4",), ()),
        (("index.skipHash=true",), ()),
        ((), ("--object-format=sha256",)),
    ],
    ids=["v2", "v3", "v4", "skip-hash", "sha256"],
)
def test_every_index_format_git_writes_names_the_files_it_tracks(
    tmp_path: Path, config: tuple[str, ...], init: tuple[str, ...]
) -> None:
    """Versions 2-4, no trailing hash, SHA-256 object names: the same four paths."""
    root = repository(tmp_path / "repo", *config, init=init)
    found = find_repository(root / "src")
    assert found is not None and found.top == root.resolve()
    tracked = found.tracked()
    assert tracked.note is None
    assert tracked.paths == {"a.ts", "link", "src/b.ts", "src/deep/c.ts"}


def test_a_worktree_reads_its_own_index_through_its_dot_git_file(tmp_path: Path) -> None:
    """`.git` is a file naming the git directory; `info/exclude` is the common one's."""
    main = repository(tmp_path / "main")
    git(main, "commit", "-q", "-m", "i")
    git(main, "worktree", "add", "-q", str(tmp_path / "wt"))
    (tmp_path / "wt" / "new.ts").write_text("2\n")
    git(tmp_path / "wt", "add", "new.ts")
    found = find_repository(tmp_path / "wt")
    assert found is not None and (tmp_path / "wt" / ".git").is_file()
    assert found.common_dir is not None
    assert found.common_dir.resolve() == (main / ".git").resolve()
    assert "new.ts" in found.tracked().paths


def test_a_repository_with_nothing_added_tracks_nothing_and_says_nothing(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    git(tmp_path / "repo", "init", "-q")
    found = find_repository(tmp_path / "repo")
    assert found is not None
    assert found.tracked().paths == frozenset() and found.tracked().note is None


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda data: data[:-25], "checksum|runs past"),
        (lambda data: b"XXXX" + data[4:], "no DIRC signature"),
        (lambda data: data[:4] + b"\0\0\0\x09" + data[8:], "index version 9"),
        (lambda data: data[:30], "shorter than an index"),
    ],
    ids=["cut", "signature", "version", "short"],
)
def test_a_damaged_index_counts_as_none_tracked_with_a_note(
    tmp_path: Path, damage: Callable[[bytes], bytes], why: str
) -> None:
    """Nothing is guessed: an index we cannot read is said, and tracks nothing."""
    root = repository(tmp_path / "repo")
    index = root / ".git" / "index"
    index.write_bytes(damage(index.read_bytes()))
    found = find_repository(root)
    assert found is not None
    tracked = found.tracked()
    assert tracked.paths == frozenset()
    assert tracked.note is not None and str(index) in tracked.note
    with pytest.raises(IndexFormatError, match=why):
        parse_index(index.read_bytes())


def test_an_index_that_is_a_fifo_or_a_symlink_is_not_opened_as_one(tmp_path: Path) -> None:
    """No wait on a FIFO, no link followed: no index, nothing tracked."""
    root = repository(tmp_path / "repo")
    index = root / ".git" / "index"
    index.unlink()
    os.mkfifo(index)
    found = find_repository(root)
    assert found is not None and found.tracked().paths == frozenset()
    index.unlink()
    index.symlink_to(tmp_path / "elsewhere")
    assert found.tracked().paths == frozenset()


def test_a_version_4_index_whose_paths_grow_without_end_is_refused_early() -> None:
    """Each entry keeps the whole path before it and adds to it: bounded, not quadratic."""
    entry = bytearray(40 + 20)
    entry[24:28] = (0o100644).to_bytes(4, "big")
    # Flags: the path's length (0xFFF past it); then strip nothing (varint 0), add 100 bytes.
    body = b"".join(
        bytes(entry) + min(100 * n, 0x0FFF).to_bytes(2, "big") + b"\0" + b"a" * 100 + b"\0"
        for n in range(1, 1001)
    )
    data = b"DIRC" + (4).to_bytes(4, "big") + (1000).to_bytes(4, "big") + body + bytes(20)
    with pytest.raises(IndexFormatError, match="longer than any work tree's"):
        parse_index(data)


def test_a_dot_git_file_with_a_relative_path_is_read_from_its_own_directory(
    tmp_path: Path,
) -> None:
    """As a submodule has it: `gitdir: ../.git/modules/sub`, relative to the `.git` file."""
    root = repository(tmp_path / "sub")
    (tmp_path / "modules").mkdir()
    (root / ".git").rename(tmp_path / "modules" / "sub")
    (root / ".git").write_text("gitdir: ../modules/sub\n")
    found = find_repository(root / "src" / "deep")
    assert found is not None and found.top == root.resolve()
    assert "src/deep/c.ts" in found.tracked().paths
    # Still the work tree's root (its .gitignore files apply), with none tracked, said.
    (root / ".git").write_text("not a pointer\n")
    found = find_repository(root / "src")
    assert found is not None and found.top == root.resolve()
    tracked = found.tracked()
    assert tracked.paths == frozenset() and "(no gitdir: line)" in (tracked.note or "")
