"""Bun's JUnit report read into per-test results under CTRF's names (ctrf-io/ctrf, v1).

The report is written by Bun inside the envelope, in the process that ran the candidate's
tests: the candidate can alter it, so everything here is candidate-influenced and the
host-collected exit code stays the fact. The parse is strict and bounded: expat with any
document type declaration refused (so no entity can be declared, internal or external, and
nothing is ever fetched), an undeclared entity is a parse error, and the report's size is
bounded before it gets here (the envelope reads at most `REPORT_MAX_BYTES`).

What the parse builds is bounded by the report's own size, not only the report: a test
inherits its file and describe path, so one long describe name over thousands of
`<testcase/>`s would otherwise be copied into each (gigabytes of JSON from a 1 MiB report).
Each name is cut to `NAME_MAX` characters ("…" marks the cut), a test keeps at most
`SUITE_DEPTH_MAX` describe levels, and the inherited names of all tests together stay within
`EXPANSION_FACTOR` times the report's size: past that, a test's file is cut to 16
characters and its describe path is the one entry `PATH_CUT` ("…"), at most 18 characters
for a `<testcase/>` of at least 11 bytes, so all of them stay within `EXPANSION_FACTOR + 2`
times the report's size.

Bun 1.4.2's reporter, checked: nested `describe` blocks are nested `<testsuite>` elements
that each repeat `file=` (the outermost one per file names the file, the nested ones the
describe path); `classname` lists the describe path innermost first ("inner > outer"), so
the path is taken from the nesting instead; a todo test is `<skipped message="TODO"/>`; a
timed-out one is `<failure type="TimeoutError">`, a thrown class other than `Error` (a
`RangeError`) is its `type`, which then leads the message as on the console; `--parallel`
may drop `line=` (kept absent, never invented); only the last `--reporter` applies, so the
plan passes exactly one; a test file that fails to load is not in the report at all (only
its console says so: see `jigcmd.protocol.bunconsole`).
"""

from __future__ import annotations

from typing import Final, Literal
from xml.parsers import expat

import msgspec

__all__ = [
    "EXPANSION_FACTOR",
    "NAME_MAX",
    "PATH_CUT",
    "REPORT_MAX_BYTES",
    "REPORT_NAME",
    "SUITE_DEPTH_MAX",
    "TRACE_FRAMES",
    "CtrfSummary",
    "CtrfTest",
    "TestReport",
    "UnreadableReport",
    "parse_junit",
]

# The report's file name in the envelope's scratch (`/tmp`), and its bound.
REPORT_NAME: Final = "jigcmd-junit.xml"
REPORT_MAX_BYTES: Final = 1 << 20
# The first frames of a failure's stack that are kept.
TRACE_FRAMES: Final = 5
# A message or trace longer than this is cut (the whole report stays readable as a resource).
_TEXT_MAX: Final = 2048
# A name (a test's, a describe block's, a file's) longer than this is cut.
NAME_MAX: Final = 512
# Describe levels a test keeps; deeper ones are one "… N more levels" entry (each test copies
# its path: a deep nest over many tests would otherwise be depth times tests).
SUITE_DEPTH_MAX: Final = 16
# The inherited names (file, describe path) of all tests may total this many characters per
# byte of the report (and at least `_EXPANSION_FLOOR`); past it they are cut as below.
EXPANSION_FACTOR: Final = 4
_EXPANSION_FLOOR: Final = 64 * 1024
_SPENT_NAME_MAX: Final = 16
PATH_CUT: Final = "…"

Status = Literal["passed", "failed", "skipped", "pending", "other"]


class UnreadableReport(ValueError):
    """The report is not a JUnit document this parser accepts; the reason says why."""


class CtrfTest(msgspec.Struct, frozen=True, omit_defaults=True):
    """One test under CTRF's field names (`suite` from the outermost describe inward)."""

    name: str
    status: Status
    duration: int
    filePath: str | None = None
    suite: list[str] | None = None
    line: int | None = None
    message: str | None = None
    trace: str | None = None
    rawStatus: str | None = None


class CtrfSummary(msgspec.Struct, frozen=True):
    """CTRF's counts; `pending` counts Bun's todo tests, `duration` is in milliseconds."""

    tests: int
    passed: int
    failed: int
    skipped: int
    pending: int
    other: int
    duration: int


class TestReport(msgspec.Struct, frozen=True):
    """The whole report: the counts and every test in document order."""

    summary: CtrfSummary
    tests: list[CtrfTest]


def parse_junit(data: bytes) -> TestReport:
    """Read Bun's JUnit XML; raise `UnreadableReport` when it is not one this accepts."""
    reader = _Reader(budget=max(_EXPANSION_FLOOR, EXPANSION_FACTOR * len(data)))
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.EntityDeclHandler = _refuse_entity
    parser.ExternalEntityRefHandler = _refuse_external
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.CharacterDataHandler = reader.text
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise UnreadableReport(f"not well-formed XML ({expat.ErrorString(exc.code)})") from exc
    except UnreadableReport:
        raise
    except (LookupError, ValueError) as exc:
        # The candidate chose these bytes: an encoding Python does not know (`encoding=` in
        # the declaration), bytes that do not decode in it, a value that does not convert.
        # Each is a fact about the report, never a failure of the run's answer. Worded by
        # its kind, never with the exception's text: that quotes the candidate's bytes (a
        # 100,000-character encoding name) into a host sentence a model reads as jigcmd's.
        raise UnreadableReport(f"not readable XML ({_unreadable(exc)})") from exc
    if not reader.seen_root:
        raise UnreadableReport("no <testsuites> or <testsuite> root element")
    return TestReport(summary=_summary(reader.tests, reader.duration), tests=reader.tests)


def _unreadable(exc: LookupError | ValueError) -> str:
    """Why Python could not read the report's text, in jigcmd's words alone."""
    if isinstance(exc, LookupError):
        # No codec of that name, or one that is no text encoding (`rot13`).
        return "its XML declaration names no text encoding Python has"
    # A multi-byte codec expat cannot map (`utf-7`, `shift_jis`), one that fails as expat
    # asks it for its map (`idna`), or a value that does not convert.
    return "its XML declaration names an encoding expat cannot read, or a value does not convert"


def _refuse_doctype(*_args: object) -> None:
    raise UnreadableReport("a document type declaration (refused: no entities are resolved)")


def _refuse_entity(*_args: object) -> None:
    raise UnreadableReport("an entity declaration (refused)")


def _refuse_external(*_args: object) -> int:
    raise UnreadableReport("an external entity reference (refused)")


class _Case:
    def __init__(self, attrs: dict[str, str], file: str | None, suite: list[str]) -> None:
        self.attrs = attrs
        self.file = file
        self.suite = suite
        self.status: Status = "passed"
        self.raw = "pass"
        self.message: str | None = None
        self.text: list[str] = []
        self.text_chars = 0
        self.in_failure = False


class _Reader:
    """Collects test cases; the describe path comes from the nesting of `<testsuite>`."""

    def __init__(self, budget: int) -> None:
        self.tests: list[CtrfTest] = []
        self.seen_root = False
        self.duration = 0
        # Per open <testsuite>: whether it is the outermost one of its file, and whether its
        # name is in `path` (it is not when deeper than `SUITE_DEPTH_MAX`).
        self.suites: list[tuple[bool, bool]] = []
        # The describe path (each name cut once, here, and shared by the tests under it).
        self.path: list[str] = []
        self.deeper = 0
        self.file: str | None = None
        self.case: _Case | None = None
        # Characters of inherited names the tests may still be given.
        self.budget = budget

    def start(self, name: str, attrs: dict[str, str]) -> None:
        if not self.seen_root:
            if name not in ("testsuites", "testsuite"):
                # Not quoted: the element's name is the candidate's, of any length.
                raise UnreadableReport("the root element is neither <testsuites> nor <testsuite>")
            self.seen_root = True
            if name == "testsuites":
                self.duration = _ms(attrs.get("time"))
                return
        if name == "testsuite":
            self._open_suite(attrs)
        elif name == "testcase":
            self.case = self._case(attrs)
        elif self.case is not None:
            self._outcome(name, attrs)

    def _open_suite(self, attrs: dict[str, str]) -> None:
        # The outermost suite naming a file is the file; nested ones repeat `file=`.
        outermost = self.file is None
        kept = False
        if outermost:
            self.file = _cut(attrs.get("file") or attrs.get("name") or "", NAME_MAX) or None
        elif len(self.path) < SUITE_DEPTH_MAX:
            self.path.append(_cut(attrs.get("name", ""), NAME_MAX))
            kept = True
        else:
            self.deeper += 1
        self.suites.append((outermost, kept))

    def _case(self, attrs: dict[str, str]) -> _Case:
        """A test case with what it inherits, charged to the budget (or cut once it is spent)."""
        own = attrs.get("file")
        file = _cut(own, NAME_MAX) if own else self.file
        path = [*self.path, f"… {self.deeper} more levels"] if self.deeper else list(self.path)
        inherited = len(file or "") + sum(map(len, path))
        if inherited <= self.budget:
            self.budget -= inherited
        else:
            file = _cut(file, _SPENT_NAME_MAX) if file else None
            path = [PATH_CUT] if path else []
        return _Case(attrs, file, path)

    def _outcome(self, name: str, attrs: dict[str, str]) -> None:
        case = self.case
        assert case is not None
        if name in ("failure", "error"):
            kind = attrs.get("type", "")
            case.status = "failed"
            case.raw = "timeout" if kind == "TimeoutError" else "fail"
            case.message = _classed(attrs.get("message") or "", kind) or None
            case.in_failure = True
        elif name == "skipped":
            todo = attrs.get("message") == "TODO"
            case.status = "pending" if todo else "skipped"
            case.raw = "todo" if todo else "skip"

    def text(self, data: str) -> None:
        # A running count: expat may call this once per character reference.
        case = self.case
        if case is not None and case.in_failure and case.text_chars < _TEXT_MAX * 4:
            case.text.append(data)
            case.text_chars += len(data)

    def end(self, name: str) -> None:
        if name == "testsuite" and self.suites:
            outermost, kept = self.suites.pop()
            if outermost:
                self.file = None
            elif kept:
                self.path.pop()
            else:
                self.deeper -= 1
        elif name == "testcase" and self.case is not None:
            self.tests.append(_test(self.case))
            self.case = None
        elif name in ("failure", "error") and self.case is not None:
            self.case.in_failure = False


# The failure types Bun gives whatever was thrown (a string too is an `Error`), and those a
# test's status already says: the rest name the thrown class, as Bun's console does.
_UNNAMED_TYPES = frozenset({"", "Error", "AssertionError", "TimeoutError"})


def _classed(message: str, kind: str) -> str:
    """`message` led by the thrown class (`RangeError: division by zero`) when it names one."""
    if kind in _UNNAMED_TYPES or message.startswith(f"{kind}:"):
        return message or kind
    return f"{kind}: {message}" if message else kind


def _test(case: _Case) -> CtrfTest:
    attrs = case.attrs
    failed = case.status == "failed"
    return CtrfTest(
        name=_cut(attrs.get("name") or "(unnamed)", NAME_MAX),
        status=case.status,
        duration=_ms(attrs.get("time")),
        filePath=case.file,
        suite=case.suite or None,
        line=_line(attrs.get("line")),
        message=_cut(case.message.strip(), _TEXT_MAX) if failed and case.message else None,
        trace=_frames("".join(case.text)) if failed else None,
        rawStatus=case.raw,
    )


def _line(text: str | None) -> int | None:
    """A `line=` of ASCII digits as a number; absent when it is not one (never invented).

    ASCII only: `str.isdigit` is also true of "²" and "①", which `int` refuses.
    """
    if text is None or not (text.isascii() and text.isdigit()) or len(text) >= 10:
        return None
    return int(text)


def _frames(text: str) -> str | None:
    """The first `TRACE_FRAMES` "at …" lines of a failure's text."""
    frames = [line.strip() for line in text.splitlines() if line.strip().startswith("at ")]
    return _cut("\n".join(frames[:TRACE_FRAMES]), _TEXT_MAX) or None


def _cut(text: str, limit: int) -> str:
    """`text`, or its first `limit - 1` characters and "…" when it is longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ms(seconds: str | None) -> int:
    """JUnit's `time` (seconds, a decimal) as whole milliseconds; 0 when absent or malformed."""
    try:
        value = float(seconds or "0")
    except ValueError:
        return 0
    return round(value * 1000) if 0 <= value < 1e9 else 0


def _summary(tests: list[CtrfTest], duration: int) -> CtrfSummary:
    counts = {status: 0 for status in ("passed", "failed", "skipped", "pending", "other")}
    for test in tests:
        counts[test.status] += 1
    return CtrfSummary(tests=len(tests), duration=duration, **counts)
