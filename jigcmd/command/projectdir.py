"""A project directory as a person has one, read as a candidate.

What can never be a candidate file is left out and said so in one line: the reserved
directories (`.git`, `node_modules`, `.jig`), paths that start with `.` (the path grammar
allows no leading dot: `.gitignore`, `.vscode/`), what `.gitignore` ignores (`gitignore.py`)
unless git tracks it or a negated `--exclude '!…'` names it, what `--exclude` names
(`.gitignore` patterns relative to the directory), binary files (a
NUL byte, as git decides) and what is not a regular file (symlinks, devices). Everything
else is the candidate; `ProjectFiles.problems` lists every rule it still breaks, so a person
gets one refusal with every fix instead of one per run.

The listing and the reads are not one step, and whoever can write the directory can swap an
entry in between (a file for a symlink to a root-only file, once sent into the candidate in
half of the runs tried). So nothing is reached by path below the directory named: each
directory is opened relative to its parent's descriptor with `O_DIRECTORY | O_NOFOLLOW`,
each file with `O_NOFOLLOW | O_NONBLOCK` and then `fstat`ed (a regular file, its size from
the descriptor, the read bounded); an entry that became a link or something else fails the
whole read with "changed while it was read", naming the path.
"""

from __future__ import annotations

import errno
import os
import posixpath
import shlex
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import msgspec

from jigcmd.command.gitignore import INFO_EXCLUDE, Ignores, pattern_spec
from jigcmd.command.snapshots import snapshot_note
from jigcmd.contract import MAX_CANDIDATE_BYTES
from jigcmd.errors import bounded
from jigcmd.policy.candidate import Problem, candidate_problems
from jigcmd.policy.imports import importers, left_out_imports
from jigcmd.policy.paths import RESERVED_COMPONENTS

__all__ = ["MAX_WALKED", "CandidateError", "ProjectFiles", "read_project"]

# A directory with more entries than this is not one project's source (a home directory?).
MAX_WALKED = 20_000
# Git's test for binary: a NUL byte in the first 8,000 bytes.
_SNIFF_BYTES = 8000
# How many names a note gives per reason before "and N more".
_NAMED = 4
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in opens at once (and is refused by `fstat`) instead of waiting.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
# The errors of an entry that is no longer what the listing said.
_CHANGED = (errno.ELOOP, errno.ENOTDIR, errno.ENOENT, errno.EISDIR, errno.ENXIO)


def _no_pause(path: PurePosixPath) -> None:
    """Nothing happens between listing `path` and opening it (but in a test)."""


# Called between listing an entry and opening it: a seam where a test swaps the entry.
_listed: Callable[[PurePosixPath], None] = _no_pause

# Why something was left out, in the order the note says it.
RESERVED = "never part of a candidate"
DOT = "a candidate path may not start with '.'"
EXCLUDED = "--exclude"
GITIGNORED = ".gitignore"
INFO_EXCLUDED = INFO_EXCLUDE
BINARY = "binary"
SPECIAL = "not a regular file"
_REASONS = (RESERVED, DOT, EXCLUDED, GITIGNORED, INFO_EXCLUDED, BINARY, SPECIAL)
# What git ignores, whichever pattern file says so: a negated --exclude brings it back.
_GIT_IGNORED = (GITIGNORED, INFO_EXCLUDED)


class CandidateError(ValueError):
    """Raised when a directory cannot be read as a candidate; the message names the path."""


@dataclass
class ProjectFiles:
    """What a project directory sends, what it leaves out and why."""

    root: Path
    files: dict[str, str] = field(default_factory=dict)
    # Files that would be sent but are not UTF-8 text, or too large to be read at all.
    not_text: list[str] = field(default_factory=list)
    oversized: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, list[str]] = field(default_factory=dict)
    # Why no file counted as tracked, though the directory is in a git work tree.
    index_note: str | None = None

    def has_package(self, name: str, importer: str = "") -> bool:
        """Whether `node_modules/<name>` is where Bun resolves it from the file `importer`:
        in its directory or one above, up to the root and past it (a workspace member's
        own `apps/cli/node_modules/`, where `bun install` links its packages, included)."""
        start = Path(os.path.abspath(self.root / posixpath.dirname(importer)))
        return any((where / "node_modules" / name).is_dir() for where in (start, *start.parents))

    def sizes(self) -> dict[str, int]:
        """Every file that would be sent, by path, with its size in UTF-8 bytes."""
        sizes = {path: len(text.encode("utf-8")) for path, text in self.files.items()}
        return {**sizes, **self.oversized}

    def problems(self, needed: Sequence[str] = (), command: str = "") -> list[Problem]:
        """Every rule the candidate breaks (empty: the request rules accept it)."""
        # A file too large or not text is still reached (its imports unknown): never excluded.
        unread = dict.fromkeys([*self.not_text, *self.oversized], "")
        reached = importers(unread | self.files, needed)
        problems = candidate_problems(
            self.sizes(), not_text=self.not_text, needed=needed, reached=reached, command=command
        )
        return self._below_the_root(problems)

    def _below_the_root(self, problems: list[Problem]) -> list[Problem]:
        """The command's missing files, when none is in the directory but all are in one
        above it at the same paths: `--files` named a directory below the project's root."""
        here = Path(os.path.abspath(self.root))
        missing = [p.path for p in problems if p.rule == "command-files"]
        if not missing or any(os.path.lexists(here / path) for path in missing):
            return problems
        above = next((d for d in here.parents if all((d / p).is_file() for p in missing)), None)
        if above is None:
            return problems
        fix = (
            f"--files {self.root} is below the project's root: --files names the project's "
            f"root, the directory the Binding's paths are relative to ({above} holds "
            f"{'this file' if len(missing) == 1 else 'these files'})"
        )
        return [
            msgspec.structs.replace(p, fix=fix) if p.rule == "command-files" else p
            for p in problems
        ]

    def note(self) -> str | None:
        """One line: what was left out and why, and what is sent; None when nothing was."""
        # What a candidate file imports from: what git ignores (sent again by a negated
        # --exclude), a reserved directory or a path starting with '.' (never sent: what it
        # holds must move) or a binary file (never sent: made some other way).
        leading = (*_GIT_IGNORED, RESERVED, DOT, BINARY)
        left_out = [path for reason in leading for path in self.left_out.get(reason, [])]
        imported = left_out_imports(self.files, frozenset(left_out))
        groups = []
        for reason in _REASONS:
            paths = self.left_out.get(reason, [])
            if paths:
                named = ", ".join(paths[:_NAMED])
                more = f" and {len(paths) - _NAMED} more" if len(paths) > _NAMED else ""
                back = _how_back(reason, paths, imported)
                groups.append(f"{named}{more} ({reason}{back})")
        if not groups:
            return None
        size = sum(self.sizes().values())
        shown = f"{size:,} byte{'s' * (size != 1)}" if size < 1024 else f"{size / 1024:.1f} KiB"
        # Counted as the refusal counts (text or not), and not "sending": it is said before
        # the rules are checked, and a refused candidate is never sent.
        count = len(self.sizes()) + len(self.not_text)
        held = f"the candidate: {count} file{'s' * (count != 1)}, {shown}"
        ignored = any(reason in self.left_out for reason in _GIT_IGNORED)
        untracked = self.index_note if ignored else None
        tail = "" if untracked is None else f"; {untracked}"
        return f"left out of the candidate: {'; '.join(groups)}; {held}{tail}"

    def snapshot_note(self, tests: Sequence[str] | None = None) -> str | None:
        """One line naming the snapshot files and tests, which cannot pass (`snapshots.py`):
        of one command's `tests`, or of the whole project."""
        left_out = [path for paths in self.left_out.values() for path in paths]
        return snapshot_note(self.files, left_out, tests)


def _reason(pattern_file: str | None) -> str | None:
    """The left-out reason for what the pattern file `Ignores.ignored` named ignores."""
    if pattern_file is None:
        return None
    return INFO_EXCLUDED if pattern_file == INFO_EXCLUDE else GITIGNORED


def _how_back(reason: str, paths: list[str], imported: Mapping[str, tuple[str, str]]) -> str:
    """How to send what git's ignore rules left out: a negated `--exclude` naming it, for
    the first of `paths` a candidate file imports (`imported`: entry → importer, path),
    else for the first of them; for what no `--exclude` sends, what to do instead."""
    if reason == RESERVED:
        return _how_out(paths, imported)
    if reason == DOT:
        return _how_else(reason, paths, imported) + _dotenv(paths)
    if reason == BINARY:
        return _how_else(reason, paths, imported)
    if reason not in _GIT_IGNORED:
        return ""
    needed = [path for path in paths if path in imported]
    if not needed:
        return f"; bring one back with --exclude {_negated(paths[0])}"
    importer, target = imported[needed[0]]
    others = f"; candidate files import {', '.join(needed[1:3])} too" if needed[1:] else ""
    # The path is a specifier's, as long as a file can hold: cut like any quoted text.
    return (
        f"; {importer} imports {bounded(target)}, left out: bring it back with "
        f"--exclude {_negated(needed[0])}{others}"
    )


def _how_out(paths: list[str], imported: Mapping[str, tuple[str, str]]) -> str:
    """Where to move what a candidate file imports from one of `paths`, reserved
    directories never sent (`lib/node_modules/pad/` to `lib/vendor/pad/`); "" for none."""
    needed = [path for path in paths if path in imported]
    if not needed:
        return ""
    importer, target = imported[needed[0]]
    directory = needed[0]  # `lib/node_modules/`
    inside = target[len(directory) :].split("/")
    # The package's own directory: `pad/`, `@scope/pad/`; the directory itself when the
    # import names it (or a file right in it).
    package = inside[: 2 if inside[0].startswith("@") else 1] if len(inside) > 1 else []
    moved = "".join(f"{part}/" for part in package)
    parent, _, reserved = directory.rstrip("/").rpartition("/")
    vendor = f"{parent}/vendor/" if parent else "vendor/"
    others = f"; candidate files import {', '.join(needed[1:3])} too" if needed[1:] else ""
    return (
        f"; {importer} imports {bounded(target)}, left out: move {directory}{moved} out of "
        f"{reserved}/ (to {vendor}{moved}, say) and import it from there{others}"
    )


def _how_else(reason: str, paths: list[str], imported: Mapping[str, tuple[str, str]]) -> str:
    """What to do about a file a candidate file imports from one of `paths` that no
    `--exclude` sends: a path starting with '.' moved to one that does not (`.config/` to
    `config/`), a binary file made another way; "" when none is imported."""
    needed = [path for path in paths if path in imported]
    if not needed:
        return ""
    importer, target = imported[needed[0]]
    if reason == DOT:
        moved = needed[0].lstrip(".")
        say = f" ({moved}, say)" if moved.strip("/") else ""
        fix = (
            f"move {needed[0]} to a path that does not start with '.'{say} and import it from there"
        )
    else:
        fix = (
            "a binary file cannot be sent (a candidate carries text only): have the command "
            "generate it when it runs, or use a text form of it"
        )
    others = f"; candidate files import {', '.join(needed[1:3])} too" if needed[1:] else ""
    return f"; {importer} imports {bounded(target)}, left out: {fix}{others}"


def _dotenv(paths: list[str]) -> str:
    """What to know of the `.env` files at the top of `paths`: renamed and sent, Bun would
    not read them either, so the values tests read from `process.env` must come from
    elsewhere; "" for none."""
    if not any(path == ".env" or path.startswith(".env.") for path in paths):
        return ""
    return (
        "; Bun loads no .env here (it runs with --no-env-file), so what the tests read from "
        "process.env that a .env file sets is unset: give it a default in code, or set it in "
        "a setup module the tests import"
    )


def _negated(path: str) -> str:
    """The `--exclude` pattern that brings `path` (`dir/` for a directory) back."""
    # Backslashes keep a name's glob characters literal in the pattern.
    literal = "".join("\\" + c if c in "\\*?[" else c for c in path)
    return shlex.quote("!/" + literal)


def read_project(directory: Path, excludes: Sequence[str] = ()) -> ProjectFiles:
    """Read `directory` as a candidate, leaving out what can never be one (see the module)."""
    try:
        # The directory the person named may itself be a link (theirs to choose); below it
        # nothing is followed.
        root_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise CandidateError(f"{directory}: no such directory") from None
    except NotADirectoryError:
        raise CandidateError(f"{directory}: not a directory") from None
    except OSError as exc:
        raise CandidateError(f"{directory}: cannot be read: {exc.strerror}") from exc
    try:
        walker = _Walker(directory, excludes)
        walker.walk(PurePosixPath("."), root_fd, ignored_above=None)
        walker.project.index_note = walker.ignores.note
    except OSError as exc:
        where = exc.filename or directory
        raise CandidateError(f"{where}: cannot be read: {exc.strerror}") from exc
    finally:
        os.close(root_fd)
    return walker.project


class _Walker:
    def __init__(self, root: Path, excludes: Sequence[str]) -> None:
        self.project = ProjectFiles(root)
        self._root = root
        self.ignores = Ignores(root)
        self._excludes = pattern_spec(list(excludes))
        self._walked = 0

    def _leave_out(self, reason: str, path: str) -> None:
        self.project.left_out.setdefault(reason, []).append(path)

    def walk(self, directory: PurePosixPath, fd: int, *, ignored_above: str | None) -> None:
        """Walk the directory open as `fd` (not closed here), `directory` in the project;
        `ignored_above`: why git ignores it (the reason, by pattern file), and it is entered
        only for the files git tracks."""
        if not ignored_above:
            # Git reads no `.gitignore` in a directory it ignores.
            self.ignores.enter(directory)
        with os.scandir(fd) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
        for entry in entries:
            self._walked += 1
            if self._walked > MAX_WALKED:
                raise CandidateError(
                    f"{self._root}: more than {MAX_WALKED:,} entries; --files names one "
                    "project's directory"
                )
            path = directory / entry.name
            if entry.is_dir(follow_symlinks=False):
                reason, ignored = self._why_not(path, entry.name, True, ignored_above)
                if reason is None:
                    child = self._open(fd, path, _DIR_FLAGS, "directory")
                    try:
                        self.walk(path, child, ignored_above=ignored)
                    finally:
                        os.close(child)
                else:
                    self._leave_out(reason, path.as_posix() + "/")
            elif not entry.is_file(follow_symlinks=False):
                self._leave_out(SPECIAL, path.as_posix())
            else:
                reason, _ = self._why_not(path, entry.name, False, ignored_above)
                if reason is None:
                    self._read(fd, path)
                else:
                    self._leave_out(reason, path.as_posix())

    def _open(self, parent: int, path: PurePosixPath, flags: int, kind: str) -> int:
        """`path`'s entry in the directory open as `parent`, without following a link."""
        _listed(path)
        try:
            return os.open(path.name, flags, dir_fd=parent)
        except OSError as exc:
            if exc.errno in _CHANGED:
                raise self._changed(path, kind) from exc
            raise OSError(exc.errno, exc.strerror, str(self._root / path)) from exc

    def _changed(self, path: PurePosixPath, kind: str) -> CandidateError:
        return CandidateError(
            f"{self._root / path}: changed while it was read (it was listed as a {kind}, and "
            "is now a symbolic link or something else); nothing was sent"
        )

    def _why_not(
        self, path: PurePosixPath, name: str, is_dir: bool, ignored_above: str | None
    ) -> tuple[str | None, str | None]:
        """Why `path` is left out (None: it is not), and why git ignores it even so (None:
        it does not)."""
        if is_dir and name in RESERVED_COMPONENTS:
            return RESERVED, None
        if path.parent == PurePosixPath(".") and name.startswith("."):
            return DOT, None
        text = path.as_posix() + ("/" if is_dir else "")
        chosen = self._excludes.check_file(text).include
        if chosen:
            return EXCLUDED, None
        ignored = ignored_above or _reason(self.ignores.ignored(path, is_dir=is_dir))
        # `chosen is False`: a negated `--exclude '!…'` brings back what git ignores.
        if ignored is None or chosen is False:
            return None, None
        if self.ignores.tracked(path, is_dir=is_dir):
            # Git never ignores a tracked file; below a directory, only the tracked ones.
            return None, ignored
        return ignored, None

    def _read(self, parent: int, path: PurePosixPath) -> None:
        relative = path.as_posix()
        fd = self._open(parent, path, _FILE_FLAGS, "regular file")
        with open(fd, "rb", closefd=True) as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise self._changed(path, "regular file")
            head = handle.read(_SNIFF_BYTES)
            if b"\x00" in head:
                self._leave_out(BINARY, relative)
                return
            if info.st_size > MAX_CANDIDATE_BYTES:
                # Too large to send whatever it holds: its size is the problem, not its text.
                self.project.oversized[relative] = info.st_size
                return
            # Bounded: the file may grow after the `fstat`.
            data = head + handle.read(MAX_CANDIDATE_BYTES + 1 - len(head))
        if len(data) > MAX_CANDIDATE_BYTES:
            self.project.oversized[relative] = len(data)
            return
        try:
            self.project.files[relative] = data.decode("utf-8")
        except UnicodeDecodeError:
            self.project.not_text.append(relative)
