"""What a model reads of one run: the evidence, cut to fit a byte budget, and the tests.

MCP hosts hand the model either `structuredContent` (Claude Code, VS Code) or the text
`content`, and cap tool results at a few thousand tokens. So every tool result is sized
here: `structuredContent` and `content` together are at most the budget in bytes of JSON
(`DEFAULT_BUDGET_BYTES`, ~6k tokens), on every protocol version. Within it: how the command
ended, the head and tail of each stream with the count of its text's bytes left out, each
stream's captured length (of the bytes the command wrote, as the run's signed statement
counts them) and SHA-256 (of the text a `resources/read` of its URI returns, the statement's
stream subject), and for a
test command the runner's per-test results under CTRF's names, failing tests first.

The cut is one knob: a scale from 1 (generous heads, tails and test lists) down to 0 (the
counts and digests only), the largest that fits, found by bisection over the encoded size.
Pure: the builder is a function of the run's result, the version and the budget.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal

import msgspec

from jigcmd.evidence import Evidence, ResourceReport, StreamText
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.commands import OutputEnds, ResourceRef, StreamEnd, TestResults
from jigcmd.protocol.dialect import DEFAULT_BUDGET_BYTES, MIN_BUDGET_BYTES
from jigcmd.protocol.invocation import cut_arguments
from jigcmd.protocol.junit import CtrfSummary, CtrfTest

__all__ = [
    "DEFAULT_BUDGET_BYTES",
    "LISTED_TESTS_MAX",
    "MIN_BUDGET_BYTES",
    "TESTS_NOTE",
    "Content",
    "LimitHit",
    "StreamView",
    "TestsView",
    "View",
    "fitted",
    "full_tests",
    "limits_hit",
]

TESTS_NOTE: Final = (
    "Per-test results from the runner's JUnit report. The runner ran candidate code, which "
    "can alter this report; the host-collected exitCode is the fact."
)
# At scale 1: bytes of each stream's head and of its tail, tests listed, text per failure.
_STREAM_MAX: Final = 6 * 1024
_FAILING_MAX: Final = 50
_OTHERS_MAX: Final = 200
_MESSAGE_MAX: Final = 1024
_FRAMES_MAX: Final = 5
_STEPS: Final = 10
# A stream's end past the cap, at most what the host keeps of it (`envelope.outputs`): all
# of it from scale 1/2, as it says why a flooding command ended.
_END_MAX: Final = 4 * 1024
# Each note's characters at scale 1 (cut as a failure's message is), and at most how many.
_NOTE_MAX: Final = 2048
_NOTES_MAX: Final = 8
# The tests `full_tests` lists at most (`jigcmd run --json`); `truncated` counts the rest.
LISTED_TESTS_MAX: Final = 5000
# Names the candidate chose (tests, describe blocks, files), as listed.
_NAME_CHARS: Final = 200
_SUITE_DEPTH: Final = 8
# jigcmd's sentences on the tests (`problem`, `incomplete`): never past this many
# characters, whole from scale 1/2 on (they are short), cut by the scale below it. Cut all
# the same, to "…" at scale 0: a field that keeps its text at scale 0 is one that a long
# enough text (or one escaped to many bytes) can push past any budget.
_SENTENCE_MAX: Final = 1024


class StreamView(msgspec.Struct, frozen=True, rename="camel"):
    """One stream as the model reads it: the head and tail of what was kept, what identifies
    all of it, and past the cap the stream's own end and how much was written."""

    captured_bytes: int
    sha256: str
    truncated: bool
    head: str
    omitted_bytes: int
    tail: str
    # The UTF-8 bytes of the captured text, which head, `omitted_bytes` and tail add up to: not
    # `captured_bytes` where the bytes are not UTF-8 (each such byte is a 3-byte U+FFFD in the
    # text) or begin with a BOM (dropped). None in a result an older jigcmd made.
    text_bytes: int | None = None
    uri: str | None = None
    # Past the cap (`truncated`), what the host keeps beside the evidence, never in it: all
    # the command wrote to the stream, the last bytes of it, and the bytes between the kept
    # text and them. None and "" when not known (a run an older jigcmd recorded).
    written_bytes: int | None = None
    end: str = ""
    end_omitted_bytes: int = 0


class TestsView(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """The runner's per-test results, cut to the budget: failing tests first, then the rest."""

    candidate_influenced: bool
    note: str
    summary: CtrfSummary | None = None
    tests: list[CtrfTest] = msgspec.field(default_factory=list)
    truncated: int = 0
    problem: str | None = None
    # Bun's unhandled errors between tests (a test file that failed to load is one), which
    # its report does not list; and why the report is not the whole result, when it is not.
    unhandled_errors: int = 0
    incomplete: str | None = None
    uri: str | None = None


# An envelope limit the run reached: memory (the kernel's OOM killer killed in it) or pids
# (a new process or thread was refused).
LimitHit = Literal["memory", "pids"]


class View(msgspec.Struct, frozen=True, rename="camel"):
    """The budgeted result: `structuredContent`, and the source of the text content."""

    command: str
    # The first words of the command line, each cut to its first characters, and how many
    # words after them are left out: a count beside the list, so no item of it is jigcmd's.
    invocation: list[str]
    invocation_omitted: int
    exit_code: int | None
    signal: str | None
    stop_reason: Literal["exited", "deadline", "cancelled"]
    # Said here, not only in `_meta`: hosts hand the model `structuredContent` alone, and a
    # memory kill is otherwise a SIGKILL with stop reason `exited`.
    limits_hit: list[LimitHit]
    cleanup: str
    candidate_digest: str
    stdin_digest: str
    stdout: StreamView
    stderr: StreamView
    tests: TestsView | None
    budget_bytes: int
    # What Bun under jigcmd will not do with the files sent, for this command (a snapshot
    # test, an ignored bunfig.toml, a package nothing installs): `jigcmd run` prints them for
    # the operator, and a model reads only this. Absent from a result jigcmd made before.
    notes: list[str] = msgspec.field(default_factory=list)


Content = Callable[[View], list[dict[str, Any]]]


def fitted(
    evidence: Evidence,
    tests: TestResults | None,
    resources: tuple[ResourceRef, ...],
    *,
    budget: int,
    content: Content,
    structured: bool,
    report: ResourceReport | None = None,
    captured: Mapping[str, int] | None = None,
    notes: Sequence[str] = (),
    ends: OutputEnds | None = None,
) -> tuple[View, list[dict[str, Any]]]:
    """The largest view (and its content blocks) whose JSON fits `budget` bytes.

    `content(view)` makes the content blocks for a view; with `structured` the view itself
    travels as `structuredContent` and counts too. `report`: the limits the run reached.
    `captured`: each stream's length as captured, by name (else its text's UTF-8 length).
    `notes`: the call's notes (`RunResult.notes`); `ends`: each stream past the cap, when
    the run was answered live.
    """

    def size(view: View) -> tuple[int, list[dict[str, Any]]]:
        blocks = content(view)
        total = len(jsonrpc.encode_json(blocks))
        if structured:
            total += len(jsonrpc.encode_json(view))
        return total, blocks

    links = {ref.name: ref.uri for ref in resources}
    hit, seen = limits_hit(report), captured or {}

    def make(scale: float) -> View:
        return _view(
            evidence,
            tests,
            links,
            hit=hit,
            captured=seen,
            budget=budget,
            scale=scale,
            notes=notes,
            ends=ends,
        )

    low = make(0.0)
    low_size, low_blocks = size(low)
    best: tuple[View, list[dict[str, Any]]] = (low, low_blocks)
    high = make(1.0)
    high_size, high_blocks = size(high)
    if high_size <= budget:
        return high, high_blocks
    if low_size > budget:
        return best
    lo, hi = 0.0, 1.0
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        view = make(mid)
        used, blocks = size(view)
        if used <= budget:
            lo, best = mid, (view, blocks)
        else:
            hi = mid
    return best


def limits_hit(report: ResourceReport | None) -> list[LimitHit]:
    """The envelope limits a run reached, as its report measured them."""
    if report is None:
        return []
    hit: list[LimitHit] = []
    if report.oom_killed:
        hit.append("memory")
    if report.pids_limit_hit:
        hit.append("pids")
    return hit


def _view(
    evidence: Evidence,
    tests: TestResults | None,
    links: dict[str, str],
    *,
    hit: list[LimitHit],
    captured: Mapping[str, int],
    budget: int,
    scale: float,
    notes: Sequence[str] = (),
    ends: OutputEnds | None = None,
) -> View:
    keep, end_keep = int(_STREAM_MAX * scale), min(_END_MAX, int(2 * _END_MAX * scale))
    shown, omitted = cut_arguments(evidence.invocation, scale)
    return View(
        command=evidence.command,
        invocation=shown,
        invocation_omitted=omitted,
        exit_code=evidence.exit_code,
        signal=evidence.signal,
        stop_reason=evidence.stop_reason,
        limits_hit=hit,
        cleanup=evidence.cleanup,
        candidate_digest=evidence.candidate_digest,
        stdin_digest=evidence.stdin_digest,
        stdout=_ended(
            _stream(evidence.stdout, keep, links.get("stdout"), captured.get("stdout")),
            None if ends is None else ends.stdout,
            end_keep,
        ),
        stderr=_ended(
            _stream(evidence.stderr, keep, links.get("stderr"), captured.get("stderr")),
            None if ends is None else ends.stderr,
            end_keep,
        ),
        tests=None if tests is None else _tests(tests, scale, links.get("junit")),
        budget_bytes=budget,
        notes=[_short(note, int(_NOTE_MAX * scale)) for note in notes[:_NOTES_MAX]],
    )


def _stream(stream: StreamText, keep: int, uri: str | None, captured: int | None) -> StreamView:
    data = stream.text.encode("utf-8")
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if len(data) <= 2 * keep:
        head, tail = stream.text, ""
    else:
        head = data[:keep].decode("utf-8", "ignore")
        tail = data[len(data) - keep :].decode("utf-8", "ignore") if keep else ""
    omitted = len(data) - len(head.encode("utf-8")) - len(tail.encode("utf-8"))
    # The bytes the command wrote, not their decoding (invalid UTF-8 becomes U+FFFD, a BOM is
    # dropped): the same count as the signed statement's, so a verifier can hold it.
    captured_bytes = len(data) if captured is None else captured
    return StreamView(
        captured_bytes=captured_bytes,
        sha256=digest,
        truncated=stream.truncated,
        head=head,
        omitted_bytes=omitted,
        tail=tail,
        text_bytes=len(data),
        uri=uri,
        # All of it was kept: what was written, known without the host's copy of its end.
        written_bytes=None if stream.truncated else captured_bytes,
    )


def _ended(view: StreamView, end: StreamEnd | None, keep: int) -> StreamView:
    """`view` with what the command wrote past the cap: the total, the last `keep` bytes of
    the end the host kept, and the count of those between the kept text and them."""
    if end is None or not end.dropped_bytes:
        return view
    shown, shown_bytes = _last_bytes(end, keep)
    return msgspec.structs.replace(
        view,
        written_bytes=view.captured_bytes + end.dropped_bytes,
        end=shown,
        end_omitted_bytes=end.dropped_bytes - shown_bytes,
    )


def _last_bytes(end: StreamEnd, keep: int) -> tuple[str, int]:
    """The end's text for its last `keep` bytes as written, and how many bytes that is.

    Counted on the bytes, not the text: each U+FFFD there stands for one invalid byte
    (`outcomes._end`), 3 bytes once encoded. Where that count disagrees with `tail_bytes` (a
    U+FFFD the command wrote, an end an older jigcmd journaled), each U+FFFD is counted as 3
    bytes (at most what it stood for): the text shown is then no more than `keep` bytes, and
    the count it is said to show no more than it does.
    """
    if keep >= end.tail_bytes:
        return end.tail, end.tail_bytes
    sizes = [1 if char == "\ufffd" else len(char.encode("utf-8")) for char in end.tail]
    exact = sum(sizes) == end.tail_bytes
    if not exact:
        sizes = [len(char.encode("utf-8")) for char in end.tail]
    count, start = 0, len(sizes)
    while start and count + sizes[start - 1] <= keep:
        start -= 1
        count += sizes[start]
    if not exact:
        count = max(0, end.tail_bytes - sum(sizes[:start]))
    return end.tail[start:], count


def _tests(tests: TestResults, scale: float, uri: str | None) -> TestsView:
    report = tests.report
    if report is None:
        problem = _sentence(tests.problem, scale)
        return _unlisted(
            TestsView(candidate_influenced=True, note=TESTS_NOTE, problem=problem, uri=uri),
            tests,
            scale,
        )
    failing = [test for test in report.tests if test.status == "failed"]
    others = [test for test in report.tests if test.status in ("skipped", "pending", "other")]
    passing = [test for test in report.tests if test.status == "passed"]
    # Failing tests are the last to go: one as soon as any test is listed, and the rest
    # (skipped and todo, then passing) only once every failing one is.
    shown_failing = [_failure(test, scale) for test in failing[: math.ceil(_FAILING_MAX * scale)]]
    room = int(_OTHERS_MAX * scale) if len(shown_failing) == len(failing) else 0
    shown = shown_failing + [_brief(test) for test in [*others, *passing][:room]]
    view = TestsView(
        candidate_influenced=True,
        note=TESTS_NOTE,
        summary=report.summary,
        tests=shown,
        truncated=len(report.tests) - len(shown),
        uri=uri,
    )
    return _unlisted(view, tests, scale)


def full_tests(tests: TestResults) -> TestsView:
    """The tests as the parse has them, failing first, at most `LISTED_TESTS_MAX` of them.

    For `jigcmd run --json`, which has no budget; the parse already bounds each name and
    their total, and `truncated` counts the tests left out.
    """
    report = tests.report
    if report is None:
        return _unlisted(
            TestsView(candidate_influenced=True, note=TESTS_NOTE, problem=_sentence(tests.problem)),
            tests,
        )
    order = {"failed": 0, "skipped": 1, "pending": 1, "other": 1, "passed": 2}
    ordered = sorted(report.tests, key=lambda test: order[test.status])
    view = TestsView(
        candidate_influenced=True,
        note=TESTS_NOTE,
        summary=report.summary,
        tests=ordered[:LISTED_TESTS_MAX],
        truncated=max(0, len(ordered) - LISTED_TESTS_MAX),
    )
    return _unlisted(view, tests)


def _unlisted(view: TestsView, tests: TestResults, scale: float = 1.0) -> TestsView:
    """`view` saying what the report leaves out of a failed run: the count never cut, the
    reason as jigcmd's sentences are."""
    missed = tests.unlisted
    if not missed.reason:
        return view
    return msgspec.structs.replace(
        view, unhandled_errors=missed.errors, incomplete=_sentence(missed.reason, scale)
    )


def _sentence(text: str, scale: float = 1.0) -> str:
    """One of jigcmd's sentences on the tests, cut as `_SENTENCE_MAX` says."""
    return _short(text, int(_SENTENCE_MAX * min(1.0, 2 * scale)))


def _failure(test: CtrfTest, scale: float) -> CtrfTest:
    message = _short(test.message, 80 + int(_MESSAGE_MAX * scale)) if test.message else None
    frames = max(1, int(_FRAMES_MAX * scale))
    trace = "\n".join(test.trace.splitlines()[:frames]) if test.trace else None
    return msgspec.structs.replace(
        _brief(test), message=message, trace=_short(trace, 200 * frames) if trace else None
    )


def _brief(test: CtrfTest) -> CtrfTest:
    """A test as listed: its name, status and where (each cut: the candidate names them)."""
    suite = (
        [_short(name, _NAME_CHARS) for name in test.suite[:_SUITE_DEPTH]] if test.suite else None
    )
    return CtrfTest(
        name=_short(test.name, _NAME_CHARS),
        status=test.status,
        duration=test.duration,
        filePath=_short(test.filePath, _NAME_CHARS) if test.filePath else None,
        suite=suite,
        line=test.line,
        rawStatus=test.rawStatus,
    )


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
