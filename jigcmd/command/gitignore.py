"""Which paths of a project git would ignore: `.gitignore` files as git reads them.

Each `.gitignore` applies to its own directory and below, its patterns relative to it; a
deeper file overrides a shallower one, and within a file the last matching pattern wins
(`!` re-includes). The repository's `.git/info/exclude` sits below them all. A directory git
ignores is not entered, so nothing under it can be re-included, as in git. When the project
directory lies inside a git work tree, the `.gitignore` files above it, up to the work
tree's root, apply too. The per-user `core.excludesFile` is not read: it is one person's
machine, not the project. Pattern matching is pathspec's `GitIgnoreSpec` (git's wildmatch).

Git never ignores a file it tracks: `tracked` says which files the index names
(`gitindex.py`), and which directories hold one (a search in the sorted paths), so that a
committed file in an ignored directory is still found.
"""

from __future__ import annotations

import bisect
import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pathspec import GitIgnoreSpec

from jigcmd.command.gitindex import Repository, find_repository

__all__ = ["INFO_EXCLUDE", "MAX_PATTERN_BYTES", "Ignores", "pattern_spec"]

# How the repository's own exclude file is named where a path is said to be left out by it.
INFO_EXCLUDE = ".git/info/exclude"

# A pattern file larger than this is refused, not read (git itself reads any size).
MAX_PATTERN_BYTES = 1 << 20
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def pattern_spec(lines: list[str]) -> GitIgnoreSpec:
    """A spec of `.gitignore` lines (also what `--exclude` patterns are)."""
    return GitIgnoreSpec.from_lines(lines)


@dataclass(frozen=True)
class _Scope:
    """One pattern file: the directory it applies to (relative to the project, "" for the
    project itself, None for a directory above it) and its spec."""

    base: PurePosixPath
    spec: GitIgnoreSpec
    # For a file above the project: the project's path relative to that file's directory.
    offset: PurePosixPath = field(default_factory=lambda: PurePosixPath("."))
    # The pattern file's name when it is not a `.gitignore` (`.git/info/exclude`).
    label: str | None = None


class Ignores:
    """The `.gitignore` rules in force under one project directory."""

    def __init__(self, root: Path) -> None:
        self._root = root
        repository = find_repository(root)
        self._scopes: list[_Scope] = [] if repository is None else _above(root, repository)
        self._loaded: set[PurePosixPath] = set()
        self._repository = repository
        # Read when first asked: a project nothing of which is ignored never needs it.
        # As sorted strings: an index may name hundreds of thousands of paths.
        self._files: list[str] | None = None
        # Why no file counts as tracked although the project is in a work tree (or None).
        self.note: str | None = None

    def _track(self, repository: Repository) -> list[str]:
        """The files the index names below the project, relative to it, sorted."""
        tracked = repository.tracked()
        self.note = tracked.note
        here = self._root.resolve().relative_to(repository.top).as_posix()
        if here == ".":
            return sorted(tracked.paths)
        prefix = here + "/"
        return sorted(p.removeprefix(prefix) for p in tracked.paths if p.startswith(prefix))

    def tracked(self, path: PurePosixPath, *, is_dir: bool) -> bool:
        """Whether git tracks `path` (a directory: a file below it), which it never ignores."""
        if self._files is None:
            self._files = [] if self._repository is None else self._track(self._repository)
        # A directory holds a tracked file when the first path at or after "dir/" starts
        # with it: a search in the sorted paths, never a set of every path's parents (an
        # index of deep paths would make that quadratic in their depth).
        key = path.as_posix() + ("/" if is_dir else "")
        at = bisect.bisect_left(self._files, key)
        if at == len(self._files):
            return False
        found = self._files[at]
        return found.startswith(key) if is_dir else found == key

    def enter(self, directory: PurePosixPath) -> None:
        """Read `directory`'s own `.gitignore` (relative to the project), once, before its
        entries are asked about."""
        if directory in self._loaded:
            return
        self._loaded.add(directory)
        lines = _read_lines(self._root / directory / ".gitignore")
        if lines:
            self._scopes.append(_Scope(directory, pattern_spec(lines)))

    def ignored(self, path: PurePosixPath, *, is_dir: bool) -> str | None:
        """The pattern file that ignores `path` (relative to the project), or None."""
        verdict: str | None = None
        for scope in self._scopes:
            if scope.base not in path.parents:
                continue
            relative = scope.offset / path.relative_to(scope.base)
            text = relative.as_posix() + ("/" if is_dir else "")
            result = scope.spec.check_file(text)
            if result.include is not None:
                verdict = _name(scope) if result.include else None
        return verdict


def _name(scope: _Scope) -> str:
    if scope.label is not None:
        return scope.label
    if scope.offset != PurePosixPath("."):
        return "a .gitignore above the project"
    return (scope.base / ".gitignore").as_posix()


def _read_lines(path: Path) -> list[str]:
    """A pattern file's lines; none when it is absent or not a regular file.

    Opened without following a symlink and without waiting on a FIFO, as git (2.32 on)
    does not follow a symlinked `.gitignore` either; a file past `MAX_PATTERN_BYTES` is an
    error (OSError naming it), never read into memory whole.
    """
    try:
        fd = os.open(path, _FLAGS)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return []
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return []
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return []
        data = handle.read(MAX_PATTERN_BYTES + 1)
    if len(data) > MAX_PATTERN_BYTES:
        raise OSError(errno.EFBIG, f"larger than {MAX_PATTERN_BYTES:,} bytes", str(path))
    return data.decode("utf-8", errors="replace").splitlines()


def _above(root: Path, repository: Repository) -> list[_Scope]:
    """`info/exclude` of the enclosing work tree, then every `.gitignore` above `root`."""
    resolved = root.resolve()
    chain = [resolved, *resolved.parents]
    top = repository.top
    scopes = []
    # A worktree's `info/exclude` is its repository's (in the common directory).
    common_dir = repository.common_dir
    exclude = [] if common_dir is None else _read_lines(common_dir / "info" / "exclude")
    here = PurePosixPath(".")
    if exclude:
        offset = PurePosixPath(resolved.relative_to(top).as_posix())
        scopes.append(_Scope(here, pattern_spec(exclude), offset, INFO_EXCLUDE))
    for directory in reversed(chain[1 : chain.index(top) + 1]):
        lines = _read_lines(directory / ".gitignore")
        if lines:
            offset = PurePosixPath(resolved.relative_to(directory).as_posix())
            scopes.append(_Scope(here, pattern_spec(lines), offset))
    return scopes
