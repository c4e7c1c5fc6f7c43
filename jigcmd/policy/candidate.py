"""Every rule a candidate breaks, at once, each with the place and the fix. Pure.

Request validation (`request.py`) stops at the first broken rule, which is right for a wire
request. A person sending a directory wants the whole list before anything runs: this module
checks the same rules (the path grammar, reserved directories, text, collisions, the file
count and total size, the command's own files) and returns one `Problem` per break, with a
fix that names the `--exclude` way out. An empty list means `validate_request` accepts the
files (a property test holds the two together).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence

import msgspec

from jigcmd.contract import MAX_CANDIDATE_BYTES, MAX_FILES
from jigcmd.policy.paths import distinct_renames, path_problem, reserved_component
from jigcmd.protocol.invocation import pasteable

__all__ = ["Problem", "candidate_problems", "exclude_pattern"]

_GLOB_SPECIAL = re.compile(r"([\\*?\[])")
# How many examples a fix names (the largest files, the fullest directories).
_EXAMPLES = 3
# How many files a `D/*` exclusion may keep with `!` before the fix is too long to type.
_KEPT = 8


class Problem(msgspec.Struct, frozen=True):
    """One broken rule: where (a candidate path, or "" for the whole), which rule, the fix."""

    path: str
    rule: str
    message: str
    fix: str

    def line(self) -> str:
        """`path: message (rule); fix: …`, one line for a person."""
        where = self.path or "the candidate"
        return f"{where}: {self.message} (rule {self.rule}); fix: {self.fix}"


def exclude_pattern(
    path: str,
    *,
    directory: bool = False,
    anchored: bool = True,
    children: bool = False,
    negate: bool = False,
) -> str:
    """The `--exclude` argument for exactly `path` (a directory's, every child's, or `!` to
    keep it), quoted for a POSIX shell so that it works pasted as a reader is shown it."""
    escaped = _GLOB_SPECIAL.sub(r"\\\1", path)
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    tail = "/*" if children else "/" if directory else ""
    pattern = ("!" if negate else "") + ("/" if anchored else "") + escaped + tail
    shown = pasteable([pattern])
    # A reader is shown a newline or U+202E escaped (`inert`): only ANSI-C quotes, `$'…'`,
    # read that escape back to the character; any other name goes in single quotes.
    return shown if shown.startswith("$'") else "'" + pattern.replace("'", "'\\''") + "'"


def candidate_problems(
    sizes: Mapping[str, int],
    *,
    not_text: Sequence[str] = (),
    needed: Sequence[str] = (),
    reached: Collection[str] | Mapping[str, str] = (),
    command: str = "",
) -> list[Problem]:
    """Every rule broken by a candidate of `sizes` (path → UTF-8 bytes).

    `not_text` are files that would be sent but are not UTF-8 text; `needed` the paths the
    command names (its tests or its entry point), which must be among the files; `reached`
    what those import (`imports.imported_closure`), which a fix never suggests leaving out;
    as a mapping (`imports.importers`) it also says who imports each, for the words of a
    fix when no exclusion can help.
    """
    why = _Needs(needed, reached, command)
    problems: list[Problem] = []
    sent = {*sizes, *not_text}
    refused = [path for path in sorted(sent) if path_problem(path) is not None]
    renames = distinct_renames(refused, sent)
    for path in sorted(sent):
        problem = _path_problem(path, why, renames.get(path))
        if problem is not None:
            problems.append(problem)
    for path in sorted(not_text):
        problems.append(
            Problem(
                path,
                "file-text",
                "not UTF-8 text (a candidate carries text only)",
                f"convert it to UTF-8{why.or_leave_out(path)}",
            )
        )
    problems += _collisions(sizes)
    # Every file counts toward the 64, text or not: so do the fix's directory counts.
    every = {path: 0 for path in not_text} | dict(sizes)
    count = len(every)
    if count > MAX_FILES:
        problems.append(_too_many(count, every, why.keep, command))
    elif count == 0:
        problems.append(
            Problem("", "files", "no files to send", "name the project's directory with --files")
        )
    total = sum(sizes.values())
    if total > MAX_CANDIDATE_BYTES:
        problems.append(_too_large(total, sizes, why))
    for path in needed:
        if path not in sizes:
            problems.append(
                Problem(
                    path,
                    "command-files",
                    f"command {command!r} needs this file, which is not among those sent",
                    "do not leave it out (check --exclude and .gitignore), or lock a Binding "
                    "without it",
                )
            )
    return problems


class _Needs:
    """What the command needs (`needed` and what they import) and why, said in a fix."""

    def __init__(
        self, needed: Sequence[str], reached: Collection[str] | Mapping[str, str], command: str
    ) -> None:
        self._needed = set(needed)
        self._importers = dict(reached) if isinstance(reached, Mapping) else {}
        self.keep = {*needed, *reached}
        self.whose = f"{command!r}" if command else "the commands"
        self.needs = "needs" if command else "need"

    def why(self, path: str) -> str:
        """`the command names it` or `test/a.test.ts imports it` ("" when it is not needed)."""
        if path in self._needed:
            return f"{self.whose} names it"
        if path not in self.keep:
            return ""
        importer = self._importers.get(path)
        return f"{importer} imports it" if importer else f"{self.whose} imports it"

    def or_leave_out(self, path: str) -> str:
        """`, or leave it out with --exclude …`; or why that is no fix, when it is needed."""
        reason = self.why(path)
        if reason:
            return f" (leaving it out is no fix: {reason})"
        return f", or leave it out with --exclude {exclude_pattern(path)}"


def _path_problem(path: str, why: _Needs, renamed: str | None) -> Problem | None:
    """`renamed`: the whole name offered for a path the grammar refuses, not one character
    a try, as `init` offers a test file's (`distinct_renames`)."""
    problem = path_problem(path)
    if problem is not None:
        to = f" to {renamed}" if renamed is not None else ""
        return Problem(path, "path-grammar", problem, f"rename it{to}{why.or_leave_out(path)}")
    reserved = reserved_component(path)
    if reserved is not None:
        pattern = exclude_pattern(reserved, directory=True, anchored=False)
        return Problem(
            path,
            "reserved-path",
            f"reserved directory {reserved}",
            f"leave it out with --exclude {pattern}",
        )
    return None


def _collisions(sizes: Mapping[str, int]) -> list[Problem]:
    found = []
    for path in sorted(sizes):
        parts = path.split("/")
        for depth in range(1, len(parts)):
            directory = "/".join(parts[:depth])
            if directory in sizes:
                found.append(
                    Problem(
                        directory,
                        "path-collision",
                        f"both a file and a directory (because of {path!r})",
                        f"leave one out with --exclude {exclude_pattern(directory)}",
                    )
                )
    return found


def _too_many(count: int, sizes: Mapping[str, int], keep: Collection[str], command: str) -> Problem:
    what = f"what {command!r} does not need" if command else "what the commands do not need"
    fix = f"leave out {what} with --exclude GLOB (a .gitignore pattern, repeatable)"
    example = _spare_directories(count, sizes, keep) or _spare_children(count, sizes, keep)
    if example:
        fix += f", e.g. {example}"
    else:
        fullest = Counter(path.split("/")[0] for path in sizes if "/" in path)
        shown = ", ".join(f"{d}/ ({_files(n)})" for d, n in sorted(fullest.items(), key=_most))
        fix += f"; the fullest directories: {shown}" if shown else ""
    return Problem(
        "", "files", f"{count} files, more than the {MAX_FILES} a candidate may hold", fix
    )


def _spare_directories(count: int, sizes: Mapping[str, int], keep: Collection[str]) -> str:
    """`--exclude` for the fullest top directories none of `keep` is in, enough of them to
    bring `count` within the limit ("" when they are not enough)."""
    kept = {path.split("/")[0] for path in keep if "/" in path}
    per_dir = Counter(path.split("/")[0] for path in sizes if "/" in path)
    chosen, left = [], count
    for directory, n in sorted(per_dir.items(), key=_most):
        if left <= MAX_FILES:
            break
        if directory not in kept:
            chosen.append((directory, n))
            left -= n
    if left > MAX_FILES or not chosen:
        return ""
    args = " ".join(f"--exclude {exclude_pattern(d, directory=True)}" for d, _ in chosen)
    named = ", ".join(f"{d}/ holds {_files(n)}" for d, n in chosen)
    return f"{args} ({named}, none of them imported by the command's files)"


def _spare_children(count: int, sizes: Mapping[str, int], keep: Collection[str]) -> str:
    """`--exclude '/D/*'` for a directory D, at any depth, whose files nothing imports bring
    `count` within the limit, with `!` for the few it must keep ("" when there is none).

    `/D/*` leaves out D's subdirectories whole, and git cannot re-include a file inside a
    left-out directory, so D qualifies only when every file it must keep is a direct child;
    generated code (`src/gen/`) imported from a file beside it is then a deeper D. Of those
    that qualify, the one needing the fewest `!`, then leaving out the most, is named.
    """
    spare: Counter[str] = Counter()
    kept: dict[str, list[str]] = {}
    for path in sizes:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            directory = "/".join(parts[:depth])
            if path in keep:
                kept.setdefault(directory, []).append(path)
            else:
                spare[directory] += 1
    best: tuple[int, int, str] | None = None
    for directory, n in spare.items():
        inside = kept.get(directory, [])
        if count - n > MAX_FILES or len(inside) > _KEPT:
            continue
        if any(p.count("/") != directory.count("/") + 1 for p in inside):
            continue
        rank = (len(inside), -n, directory)
        best = rank if best is None or rank < best else best
    if best is None:
        return ""
    directory, n = best[2], -best[1]
    inside = sorted(kept.get(directory, []))
    if not inside:
        args = [f"--exclude {exclude_pattern(directory, directory=True)}"]
    else:
        args = [f"--exclude {exclude_pattern(directory, children=True)}"]
        args += [f"--exclude {exclude_pattern(p, negate=True)}" for p in inside]
    return (
        f"{' '.join(args)} (leaves out {'the ' * (n != 1)}{_files(n)} of {directory}/ the "
        "command does not import)"
    )


def _most(item: tuple[str, int]) -> tuple[int, str]:
    return (-item[1], item[0])


def _files(n: int) -> str:
    return f"{n} file{'s' * (n != 1)}"


def _too_large(total: int, sizes: Mapping[str, int], why: _Needs) -> Problem:
    message = (
        f"{total:,} bytes, more than the {MAX_CANDIDATE_BYTES:,} (256 KiB) a candidate may hold"
    )
    kept = sum(size for path, size in sizes.items() if path in why.keep)
    if kept > MAX_CANDIDATE_BYTES:
        return Problem("", "candidate-size", message, _needed_too_large(kept, sizes, why))
    largest = sorted(
        ((size, path) for path, size in sizes.items() if path not in why.keep),
        key=lambda item: (-item[0], item[1]),
    )
    # Only the files that matter: the largest until leaving them out is enough (at most
    # three), not a 37-byte file beside the one 480 KiB file that is the whole problem.
    named, left = [], total
    for size, path in largest[:_EXAMPLES]:
        if left <= MAX_CANDIDATE_BYTES:
            break
        named.append((size, path))
        left -= size
    examples = ", ".join(f"{path} ({size:,} bytes)" for size, path in named)
    fix = "leave out large files with --exclude GLOB"
    if largest:
        # "The largest" is of the files a fix may leave out, and says so when some are kept:
        # as what is known, no import of it, not "not needed" (a test may `Bun.file` it).
        which = " that no command file imports" if why.keep else ""
        label = (
            f"the largest files{which}"
            if len(named) != 1
            else f"the largest file{which}, enough by itself"
        )
        fix += f", e.g. --exclude {exclude_pattern(largest[0][1])}; {label}: {examples}"
    return Problem("", "candidate-size", message, fix)


def _needed_too_large(kept: int, sizes: Mapping[str, int], why: _Needs) -> str:
    """The fix when what the command needs is too large by itself: no exclusion helps."""
    needed = sorted(
        ((size, path) for path, size in sizes.items() if path in why.keep),
        key=lambda item: (-item[0], item[1]),
    )
    size, path = needed[0]
    if size > MAX_CANDIDATE_BYTES:
        what = f"{path} ({size:,} bytes) alone is more than that, and {why.why(path)}"
    else:
        shown = "; ".join(f"{p} ({n:,} bytes): {why.why(p)}" for n, p in needed[:_EXAMPLES])
        what = f"the files {why.whose} {why.needs} come to {kept:,} bytes by themselves ({shown})"
    return (
        f"none by --exclude: {what}; make it smaller (or have the command make it when it "
        "runs), or lock a Binding whose commands do not need it"
    )
