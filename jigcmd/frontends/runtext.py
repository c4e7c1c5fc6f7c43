"""`jigcmd run`'s answer for a person: the summary, then the candidate's output, made inert.

The output is the candidate's, and a terminal obeys what it reads: escape sequences moved
the cursor and rewrote the `ended:` line into a forged "exit code 0", set the clipboard
(OSC 52) and the window title. So every control character but newline and tab (C0, DEL,
C1) and the Unicode controls that reorder a line (bidi embeddings, overrides, isolates and
marks) is shown as its escape, `\\x1b`, `\\x9b`, `\\u202e`, whatever stdout is (a file is read
on a terminal later); so are U+2028 and U+2029, where `str.splitlines()` breaks a line. And
every line of the output is framed: it starts with `| `, which none of jigcmd's own lines
do, so a candidate printing "ended: exit code 0" cannot pass for the summary. The exact
text is in `--json`. Pure: text in, text out.
"""

from __future__ import annotations

from typing import Final

from jigcmd.evidence import OUTPUT_CAP_BYTES, Evidence, ResourceReport
from jigcmd.policy.planner import CEILING_SECONDS, ran_argv
from jigcmd.protocol.commands import OutputEnds, StreamEnd
from jigcmd.protocol.counts import counted
from jigcmd.protocol.inert import one_line, visible
from jigcmd.protocol.invocation import pasteable
from jigcmd.protocol.junit import NAME_MAX, CtrfTest
from jigcmd.protocol.mcp_view import TestsView

__all__ = ["FRAME", "one_line", "pasteable", "readable", "visible"]

# Starts each line of the candidate's output; none of jigcmd's own lines does.
FRAME: Final = "| "


def readable(
    evidence: Evidence,
    report: ResourceReport | None,
    tests: TestsView | None = None,
    timeout_s: float | None = None,
    ends: OutputEnds | None = None,
) -> str:
    """The summary lines, then each stream framed line by line (ends with a newline);
    `timeout_s`: the `--timeout` that set the run's deadline, if one did; `ends`: each
    stream past the cap, said after what the evidence kept of it."""
    ended = (
        f"exit code {evidence.exit_code}"
        if evidence.exit_code is not None
        else f"signal {evidence.signal}"
    )
    lines = [
        # The argv that ran (the evidence's is the logical one, without `./` or Bun's
        # posture flags: pasted, its test paths were name filters matching no file), quoted
        # as a shell would need it: `'a b'` and `''` are one argument each. `jigcmd run`
        # always has Bun write its JUnit report.
        f"command:    {evidence.command}: {pasteable(ran_argv(evidence.invocation, junit=True))}",
        f"candidate:  {evidence.candidate_digest}",
        f"ended:      {ended} (stop reason: {evidence.stop_reason}, cleanup: {evidence.cleanup})",
    ]
    if report is not None:
        memory = (
            "n/a"
            if report.peak_memory_bytes is None
            else f"{report.peak_memory_bytes / 2**20:.1f} MiB"
        )
        cpu = "n/a" if report.cpu_ms is None else f"{report.cpu_ms:.1f} ms"
        lines.append(
            # Wall time runs from the candidate's start; the setup before it is not in it.
            f"resources:  wall {report.wall_ms:.1f} ms from the candidate's start to its end "
            f"(after {report.setup_ms:.1f} ms of envelope setup), "
            f"cpu {cpu}, peak memory {memory}, oom killed {report.oom_killed}, "
            f"pids limit hit {report.pids_limit_hit}"
        )
    stopped = evidence.stop_reason != "exited" and evidence.invocation[1:2] == ["test"]
    if stopped and (tests is None or tests.summary is None):
        # A test command (its invocation is `bun test PATH…`, `ran_argv`) killed before it
        # ended has no report to read: said, with the limit it reached.
        lines.append(f"tests:      {_stopped_line(evidence.stop_reason, timeout_s)}")
    elif tests is not None:
        lines.append(f"tests:      {_tests_line(tests)}")
    # Each line of ours is made inert too: the invocation and test names are not all ours.
    text = [one_line(line) for line in lines]
    for name, stream in (("stdout", evidence.stdout), ("stderr", evidence.stderr)):
        end = None if ends is None else getattr(ends, name)
        if end is not None and end.dropped_bytes:
            note = f", truncated, its first {OUTPUT_CAP_BYTES:,} bytes"
        else:
            note = ", truncated" if stream.truncated else ""
        text.append(f"--- {name}{note}: each line after {FRAME!r} ---")
        text.extend(_framed(stream.text))
        if end is not None and end.dropped_bytes:
            text.append(f"--- {name}, {_after(end)}: each line after {FRAME!r} ---")
            text.extend(_framed(end.tail))
    text.append("--- end of output ---")
    return "\n".join(text) + "\n"


def _framed(shown: str) -> list[str]:
    """Each line of a stream's `shown` text, made inert, after the frame."""
    shown = shown.removesuffix("\n")
    return [FRAME + line for line in visible(shown).split("\n")] if shown else []


def _after(end: StreamEnd) -> str:
    """What follows the kept text: all the bytes dropped, or how many are not shown and
    the last ones."""
    if end.tail_bytes >= end.dropped_bytes:
        return f"the {counted(end.dropped_bytes, 'byte')} after them"
    unseen = end.dropped_bytes - end.tail_bytes
    last = counted(end.tail_bytes, "byte")
    return f"{counted(unseen, 'byte')} after them not kept, then its last {last}"


def _tests_line(tests: TestsView) -> str:
    """The per-test counts (or why there are none), with the runner's caveat."""
    # First what the report leaves out: the counts after it are then only the report's.
    incomplete = f"INCOMPLETE: {tests.incomplete}. " if tests.incomplete else ""
    if tests.summary is None:
        also = "And no" if incomplete else "no"
        return f"{incomplete}{also} per-test results: the runner's report is {tests.problem}"
    s = tests.summary
    # The describe path too, as MCP's words give it: `describe.each` repeats a test's name.
    failed = [_path(test) for test in tests.tests if test.status == "failed"]
    named = f" ({', '.join(failed[:5])}{', …' if len(failed) > 5 else ''})" if failed else ""
    alone = "The report alone: " if incomplete else ""
    return (
        f"{incomplete}{alone}{s.tests} run, {s.passed} passed, {s.failed} failed{named}, "
        f"{s.skipped} skipped, {s.pending} todo "
        "(from the runner's report, which candidate code can alter)"
    )


def _path(test: CtrfTest) -> str:
    """`outer > inner > name`, cut to one name's bound (`junit.NAME_MAX`) as the name alone was."""
    path = " > ".join([*(test.suite or []), test.name])
    return path if len(path) <= NAME_MAX else path[:NAME_MAX] + "…"


def _stopped_line(stop_reason: str, timeout_s: float | None) -> str:
    """Why a test command stopped by its deadline or a cancel has no per-test results."""
    if stop_reason == "deadline":
        limit = (
            f"the {CEILING_SECONDS:g} s ceiling"
            if timeout_s is None
            else f"--timeout {timeout_s:g}"
        )
        by = f"at its deadline ({limit})"
    else:
        by = "by a cancel (SIGINT, SIGTERM or SIGHUP)"
    return (
        f"no per-test results: the runner was stopped {by} before it ended; "
        "what it printed until then is below"
    )
