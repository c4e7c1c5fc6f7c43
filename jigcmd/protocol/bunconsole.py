"""What `bun test`'s console counts that its JUnit report leaves out: errors between tests.

Bun 1.4.2, checked: a test file that fails to load (a missing import, a top-level `throw`)
is no `<testsuite>` in the JUnit report and no `errors=` on its root; when every file fails
so, Bun writes no report at all. Its stderr alone says so: the file's `path:` line, then
`# Unhandled error between tests` and the error, and a footer ending the output,
` 1 pass`, ` 1 fail`, ` 1 error`, `Ran 2 tests across 2 files. [7.00ms]`, where each such
error also counts as a fail. Without this the summary said "0 failed" for a run Bun failed.

The console is the candidate's output as much as the report is, so this is read only to
explain a run the host saw fail (a non-zero exit code, or a runner killed or stopped: the
fact): a candidate that prints a fake footer can make its failed run look worse, never a
passing one look failed, nor a failed one look passed. After an exit 0 it only says why a
report is missing (`no_test_ran`, `has_footer`), as the console's word, or that the report
lists failures all the same, or that the console shows a `(fail)` line the report does not list
(a candidate that failed a test, then wrote a passing report and exited 0 in `afterAll`).
Bun's footer, when the output ends with one, is its count of
errors: a header the candidate printed too never adds to it (the headers are the count only
without a footer, and said to be what stderr shows, not Bun's count).
Pure: text in, counts out, bounded by what it keeps.

Past its 64 KiB cap stderr's retained text is its beginning, not its end: the footer is then
read from the stream's last 4 KiB (`tail`, kept by the host beside the retained text), the
files' headers from the retained text as before.

A file's header is any line ending in `:`, which a candidate can print too: the reason, a
sentence of jigcmd's, names a header's file only when it is one of the test files the command
runs (the Binding's, which the request must hold), and only counts the others, never quoting
them ("jigcmd re-ran the file and all 40 tests PASSED (exit code 0:" is such a line).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Final

import msgspec

from jigcmd.protocol.counts import counted

__all__ = [
    "UNHANDLED_HEADER",
    "UNHANDLED_NAME",
    "Unlisted",
    "command_files",
    "has_footer",
    "no_test_ran",
    "unlisted",
]

UNHANDLED_HEADER: Final = "# Unhandled error between tests"
# How one unhandled error is named among the failed tests (after its file, when known).
UNHANDLED_NAME: Final = "(unhandled error between tests)"
# The footer is the end of the output: only this much of stderr's end is searched for it.
_FOOTER_WINDOW: Final = 4096
_FOOTER_COUNT = re.compile(r"^ (\d{1,9}) (pass|fail|error)$")
_FOOTER_RAN = re.compile(r"^(Ran (\d{1,9}) tests? across \d{1,9} files?)\.")
_FILE = re.compile(r"^([^\s()#][^:]*):$")
# A test's result line as Bun prints it, `(fail) describe > name [0.44ms]`.
_FAIL_LINE = re.compile(r"^\(fail\) (.+?)(?: \[[0-9.]+m?s\])?$")
# Files named at most (the count is kept whole).
_FILES_MAX: Final = 100
_NAME_MAX: Final = 512
# The reason names this many files, each cut to `_NAMED_MAX` (it goes to a model's budget).
_NAMED_FILES: Final = 3
_NAMED_MAX: Final = 80


class Unlisted(msgspec.Struct, frozen=True):
    """The failures Bun counted that its report does not list, and the reason to say so."""

    # Unhandled errors between tests (a test file that failed to load is one).
    errors: int = 0
    # The files they came from, as the console names them ("" where it names none).
    files: tuple[str, ...] = ()
    # Why the report is not the whole result, for a person or a model; "" when it is.
    reason: str = ""


def command_files(invocation: Sequence[str]) -> frozenset[str]:
    """The test files a test command's logical invocation (`bun test PATH…`) runs; none for
    any other command."""
    return frozenset(invocation[2:]) if invocation[1:2] == ["test"] else frozenset()


def unlisted(
    stderr: str,
    exit_code: int | None,
    listed_failures: int | None,
    tail: str = "",
    *,
    test_files: Collection[str] = (),
    listed_names: Collection[str] | None = None,
) -> Unlisted:
    """What the report misses of a run that exited `exit_code` (None: killed or stopped).

    `listed_failures`: the failed tests the report lists (None: there is no report).
    `tail`: the end of stderr when it passed its cap ("" when `stderr` is all of it).
    `test_files`: the files the command runs (`command_files`), the only names the reason
    quotes (none by default: a header is then only counted).
    `listed_names`: the failed tests the report lists, each `describe > name` as Bun's console
    prints it (None: no report, or none to compare the console's `(fail)` lines with).
    """
    if exit_code == 0:
        # A report listing failures after an exit 0 (a test's `process.exit(0)` after them),
        # or a console showing failures the report does not list: the candidate's word can
        # only make its run look worse, so it is said, never dropped.
        reasons = []
        if listed_failures:
            plural = "s" if listed_failures > 1 else ""
            reasons.append(
                f"the runner exited with code 0, yet its report lists {listed_failures} "
                f"failed test{plural}; see stderr"
            )
        if listed_names is not None:
            shown = _unlisted_fails(stderr + "\n" + tail, listed_names)
            if shown:
                reasons.append(_fails_reason(shown))
        return Unlisted(reason="; ".join(reasons))
    # A run that failed: a non-zero exit, or a runner killed or stopped (exit_code None).
    headers = _unhandled_files(stderr)
    footer = _footer_errors(tail or stderr)
    # Bun's footer, when the output ends with one, is Bun's count: a header is a line the
    # candidate can print as well, so headers are the count only without a footer.
    errors = len(headers) if footer is None else footer
    if errors:
        # More headers than Bun counted: which are Bun's is unknown, so none names a file.
        files = headers if len(headers) <= errors else ()
        # A file per error, "" where the console names none (a footer counting more).
        padded = files[:_FILES_MAX] + ("",) * max(0, min(errors, _FILES_MAX) - len(files))
        kept = tuple(_short(file, _NAME_MAX) for file in padded)
        reason = _errors_reason(errors, files, test_files, footer is not None)
        return Unlisted(errors=errors, files=kept, reason=reason)
    if listed_failures == 0 and exit_code is not None:
        return Unlisted(
            reason=f"the runner exited with code {exit_code} but its report lists no failed "
            "test; see stderr"
        )
    return Unlisted()


def _errors_reason(
    errors: int, files: tuple[str, ...], test_files: Collection[str], footer: bool
) -> str:
    """The reason, naming the first files that are test files of the command (it goes into
    a model's budget) and counting the errors under any other header, unquoted; `footer`:
    the count is Bun's footer's, else only the headers the output shows."""
    named = [file for file in files if file in test_files]
    others = sum(1 for file in files if file and file not in test_files)
    shown = [_short(file, _NAMED_MAX) for file in named[:_NAMED_FILES]]
    if len(named) > _NAMED_FILES:
        shown.append("…")
    if others:
        lines = "lines that name" if others > 1 else "a line that names"
        shown.append(f"{others} after {lines} no test file of the command")
    where = f" ({', '.join(shown)})" if shown else ""
    # Bun's count is said to be Bun's; without its footer only what the output shows.
    said = "Bun counted" if footer else "stderr shows"
    unsummed = "" if footer else " (it ends with no summary of Bun's to count them)"
    return (
        f"{said} {counted(errors, 'unhandled error')} between tests{where}, failures that are "
        "no test's result: a test file that failed to load, or an error outside any test"
        f"{unsummed}; see stderr"
    )


def _unlisted_fails(console: str, listed_names: Collection[str]) -> int:
    """How many distinct `(fail)` names the console shows that the report does not list.

    A name the report lists is its `describe > name` or that name's first line (the console
    cuts a multi-line name there). Only counted: the names are the candidate's, and the
    count is bounded by the lines the host kept.
    """
    listed = {*listed_names, *(name.split("\n", 1)[0] for name in listed_names)}
    shown = {
        fail.group(1)
        for line in console.splitlines()
        if (fail := _FAIL_LINE.match(line)) is not None and fail.group(1) not in listed
    }
    return len(shown)


def _fails_reason(shown: int) -> str:
    tests = "a failed test" if shown == 1 else f"{shown} failed tests"
    return (
        f"the console shows {tests} the report does not list: the report is not to be "
        "trusted (the candidate's code can write one); see stderr"
    )


def _unhandled_files(stderr: str) -> tuple[str, ...]:
    """The file of each `# Unhandled error between tests` header ("" when none precedes it)."""
    files: list[str] = []
    file = ""
    for line in stderr.splitlines():
        header = _FILE.match(line)
        if header is not None:
            file = header.group(1)
        elif line == UNHANDLED_HEADER:
            files.append(file)
    return tuple(files)


def no_test_ran(stderr: str, tail: str = "") -> str:
    """The footer's `Ran 0 tests across N files` when it says no test ran; "" otherwise.

    Bun 1.4.2 writes no JUnit report when no test ran (an empty test file): this says why
    a report is missing after an exit 0, in the console's words (the candidate's output).
    """
    lines = _footer(tail or stderr)
    ran = _FOOTER_RAN.match(lines[-1]) if lines else None
    return ran.group(1) if ran is not None and int(ran.group(2)) == 0 else ""


def has_footer(stderr: str, tail: str = "") -> bool:
    """Whether the output ends with Bun's `Ran N tests across M files.` line.

    Bun prints it last: without it the runner ended before its summary (a test's
    `process.exit(0)`), and an exit 0 then says nothing of the tests after that point.
    """
    return bool(_footer(tail or stderr))


def _footer(stderr: str) -> list[str]:
    """The last lines of the output, ending with Bun's `Ran …` line; [] when it does not."""
    lines = stderr[-_FOOTER_WINDOW:].rstrip("\n").splitlines()
    if not lines or _FOOTER_RAN.match(lines[-1]) is None:
        return []
    return lines


def _footer_errors(stderr: str) -> int | None:
    """The ` N error` count of the footer ending the output: 0 without one, None: no footer."""
    lines = _footer(stderr)
    if not lines:
        return None
    for line in reversed(lines[:-1]):
        count = _FOOTER_COUNT.match(line)
        if count is not None and count.group(2) == "error":
            return int(count.group(1))
        if count is None and not line.startswith(" "):
            break
    return 0


def _short(name: str, limit: int) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"
