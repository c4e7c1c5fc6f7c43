"""MCP tool results built from a run: a completed one, or a refusal or failure, each budgeted.

A completed command, whatever its exit, is `isError: false`; refusals and operational
failures are `isError: true` with a readable text, the budgeted view when evidence was
collected (a deadline, a cancel), and the failure code under `_meta["jigcmd/error"]`.
From 2025-06-18 the view is `structuredContent` and the text says the same in words, with a
`resource_link` to each per-run resource; before it there is no `structuredContent` and the
view follows the words as JSON text. Either way both together fit the budget (see
`mcp_view`); measurements travel beside it in `_meta["jigcmd/report"]`, outside the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from jigcmd.attest import dsse
from jigcmd.errors import JigError, bounded_details
from jigcmd.evidence import OUTPUT_CAP_BYTES, Evidence, ResourceReport
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.commands import OutputEnds, ResourceRef, RunResult, TestResults
from jigcmd.protocol.counts import counted
from jigcmd.protocol.inert import code_span, fenced, json_text, one_line, prose_line
from jigcmd.protocol.invocation import invocation_line
from jigcmd.protocol.mcp_versions import LATEST_VERSION, STRUCTURED
from jigcmd.protocol.mcp_view import (
    DEFAULT_BUDGET_BYTES,
    LimitHit,
    StreamView,
    TestsView,
    View,
    fitted,
)

__all__ = ["completed_result", "failure_result", "view_text"]

# Evidence collected before a deadline or cancel arrives as the builtins of its JSON.
_as_evidence: Final = msgspec.json.Decoder(Evidence)
_STATUS_WORDS: Final = {"skipped": "skipped", "pending": "todo", "other": "other"}
# A limit the run reached, when the ending does not say it already.
_LIMIT_WORDS: Final[dict[LimitHit, str]] = {
    "memory": "It reached the envelope's memory limit: the kernel's OOM killer killed a "
    "process of it.",
    "pids": "It reached the envelope's task limit: a new process or thread was refused.",
}


def completed_result(
    result: RunResult, version: str = LATEST_VERSION, budget: int = DEFAULT_BUDGET_BYTES
) -> dict[str, Any]:
    """A completed run: not an error whatever the exit; the budgeted view and its words."""
    completed: dict[str, Any] = {"isError": False, "_meta": {"jigcmd/report": result.report}}
    view, content = _fit(
        result.evidence,
        result.tests,
        result.resources,
        "",
        version=version,
        budget=budget,
        report=result.report,
        captured=_signed_facts(result.attestation)[0],
        notes=result.notes,
        ends=result.ends,
    )
    completed["content"] = content
    if version in STRUCTURED:
        completed["structuredContent"] = view
    return completed


def failure_result(
    error: JigError, version: str = LATEST_VERSION, budget: int = DEFAULT_BUDGET_BYTES
) -> dict[str, Any]:
    """A refusal or operational failure as a tool error with a readable reason.

    Evidence collected before a deadline or cancel rides as the budgeted view, the resources
    its statement says the run used in `_meta["jigcmd/report"]`.
    """
    details = bounded_details(error.details) or {}
    evidence = details.pop("command", None)
    meta: dict[str, Any] = {"code": error.code.value}
    if details:
        meta["details"] = details
    header = f"{error.code.value}: {error.message}"
    result: dict[str, Any] = {"isError": True, "_meta": {"jigcmd/error": meta}}
    if evidence is None:
        result["content"] = [{"type": "text", "text": header}]
        return result
    collected = (
        evidence
        if isinstance(evidence, Evidence)
        else _as_evidence.decode(jsonrpc.encode_json(evidence))
    )
    captured, report = _signed_facts(error.attestation)
    if report is not None:
        # What the envelope measured of a run it stopped, beside the error as a completed
        # run's beside its result (from its statement: a replay answers the same).
        result["_meta"]["jigcmd/report"] = report
    view, content = _fit(
        collected,
        error.tests,
        error.resources,
        header,
        version=version,
        budget=budget,
        report=report,
        captured=captured,
        notes=error.notes,
        ends=error.ends,
    )
    result["content"] = content
    if version in STRUCTURED:
        result["structuredContent"] = view
    return result


def _fit(
    evidence: Evidence,
    tests: TestResults | None,
    resources: tuple[ResourceRef, ...],
    header: str,
    *,
    version: str,
    budget: int,
    report: ResourceReport | None = None,
    captured: dict[str, int] | None = None,
    notes: Sequence[str] = (),
    ends: OutputEnds | None = None,
) -> tuple[View, list[dict[str, Any]]]:
    structured = version in STRUCTURED
    links = [_link(ref) for ref in resources] if structured else []

    def content(view: View) -> list[dict[str, Any]]:
        words = view_text(view, header)
        blocks: list[dict[str, Any]] = [{"type": "text", "text": words}]
        if not structured:
            # No structuredContent before 2025-06-18: the same budgeted view, as JSON text.
            # Escaped as the words are (bidi, line separators): a reader splitting its lines
            # at U+2028 sees no line of the caller's; a JSON parser reads the same view.
            blocks.append({"type": "text", "text": json_text(jsonrpc.encode_json(view).decode())})
        return blocks + links

    return fitted(
        evidence,
        tests,
        resources,
        budget=budget,
        content=content,
        structured=structured,
        report=report,
        captured=captured,
        notes=notes,
        ends=ends,
    )


class _Captured(msgspec.Struct):
    captured_bytes: int = msgspec.field(name="capturedBytes")


class _Streams(msgspec.Struct):
    stdout: _Captured
    stderr: _Captured


class _Ending(_Streams):
    resources: ResourceReport | None = None


class _Predicate(msgspec.Struct):
    ending: _Ending


class _Signed(msgspec.Struct):
    predicate: _Predicate


_signed: Final = msgspec.json.Decoder(_Signed)


def _signed_facts(bundle: bytes | None) -> tuple[dict[str, int], ResourceReport | None]:
    """Each stream's length as captured, and the resources the envelope measured, as the run's
    signed statement says them (nothing without one)."""
    # The evidence keeps the decoded text only; the statement counts the bytes as written,
    # and the result says that count so it can be held against the statement. A stopped run's
    # error carries no report of its own on a replay: the statement is where both answers
    # read the limits it reached.
    if bundle is None:
        return {}, None
    try:
        ending = _signed.decode(dsse.payload_of(dsse.decode_bundle(bundle)[0])).predicate.ending
    except (dsse.BundleError, msgspec.ValidationError, msgspec.DecodeError):
        return {}, None
    captured = {"stdout": ending.stdout.captured_bytes, "stderr": ending.stderr.captured_bytes}
    return captured, ending.resources


def _link(ref: ResourceRef) -> dict[str, Any]:
    link: dict[str, Any] = {
        "type": "resource_link",
        "uri": ref.uri,
        "name": ref.name,
        "mimeType": ref.mime_type,
        "size": ref.size,
    }
    if ref.description:
        link["description"] = ref.description
    return link


def view_text(view: View, header: str = "") -> str:
    """The view in words: how it ended, the tests, the notes, then each stream's head and
    tail, quoted."""
    lines = [header] if header else []
    lines.append(_ending(view))
    if view.tests is not None:
        lines += _tests_text(view.tests)
    # jigcmd's words on the files sent; the paths in them are the caller's, one line each.
    lines += [f"Note: {one_line(note)}" for note in view.notes]
    lines += _stream_text("stdout", view.stdout)
    lines += _stream_text("stderr", view.stderr)
    return "\n".join(lines)


def _ending(view: View) -> str:
    """How the command ended, and the envelope limits it reached."""
    # Only a command that ended by itself was killed by the OOM killer: a deadline's or a
    # cancel's SIGKILL is the stop's, whatever a child of it met at the memory limit before.
    memory_kill = (
        "memory" in view.limits_hit and view.signal == "SIGKILL" and view.stop_reason == "exited"
    )
    if memory_kill:
        how = "was killed at the envelope's memory limit (the kernel's OOM killer sent SIGKILL; "
    elif view.signal is not None:
        how = f"was killed by {view.signal} ("
    else:
        how = f"exited with code {view.exit_code} ("
    ended = (
        # The arguments are the caller's: quoted as `jigcmd run` quotes them, one line the
        # span cannot be closed in, so none of them can end this line and start another.
        f"{code_span(invocation_line(view.invocation, view.invocation_omitted))} {how}stop "
        f"reason: {view.stop_reason}; "
        f"cleanup {view.cleanup})."
    )
    limits = [_LIMIT_WORDS[hit] for hit in view.limits_hit if not (memory_kill and hit == "memory")]
    return " ".join([ended, *limits])


def _tests_text(tests: TestsView) -> list[str]:
    # Said first: the counts below are only the report's, which left these failures out.
    # It names files from the candidate's console: one line, like the names below.
    incomplete = [f"Tests INCOMPLETE: {one_line(tests.incomplete)}."] if tests.incomplete else []
    if tests.summary is None:
        where = f" (see {tests.uri})" if tests.uri else ""
        return [
            *incomplete,
            f"Tests: no per-test results: the runner's report is {one_line(tests.problem or '')}"
            f"{where}.",
        ]
    s = tests.summary
    lines = [
        *incomplete,
        f"Tests: {s.tests} run: {s.passed} passed, {s.failed} failed, {s.skipped} skipped, "
        f"{s.pending} todo, {s.other} other. {tests.note}",
    ]
    for test in tests.tests:
        # Every name, path, message and frame here is the runner's (candidate-influenced):
        # each stays on its own line, so none can pass for a line of the host's.
        where = one_line(test.filePath or "?")
        if test.line is not None:
            where += f":{test.line}"
        name = one_line(" > ".join([*(test.suite or []), test.name]))
        if test.status == "failed":
            message = prose_line(test.message or "")
            lines.append(f"FAILED {name} ({where}, {test.duration} ms): {message}")
            lines += [f"    {one_line(frame)}" for frame in (test.trace or "").splitlines()]
        else:
            lines.append(f"{_STATUS_WORDS.get(test.status, test.status)}: {name} ({where})")
    if tests.truncated:
        rest = f"; the whole report: {tests.uri}" if tests.uri else ""
        lines.append(f"[… {counted(tests.truncated, 'more test')} not listed{rest} …]")
    return lines


def _stream_text(name: str, stream: StreamView) -> list[str]:
    if not stream.truncated:
        more = ""
    elif stream.written_bytes is None:
        more = f"; the command wrote more, its first {OUTPUT_CAP_BYTES:,} bytes are kept"
    else:
        more = (
            f"; the command wrote {counted(stream.written_bytes, 'byte')}, its first "
            f"{OUTPUT_CAP_BYTES:,} bytes are kept"
        )
    if not stream.captured_bytes:
        return [f"{name}: empty{more}."]
    # Past the cap the URI holds what was kept, not all the command wrote.
    kept = "the kept bytes" if stream.truncated else "all of it"
    where = f", {kept} at {stream.uri}" if stream.uri else ""
    text, of_text = _as_text(stream)
    lines = [
        f"{name} ({counted(stream.captured_bytes, 'byte')}, {stream.sha256}{more}{where}{text}):"
    ]
    # The candidate's text is quoted, so no line of it passes for the host's; the count of
    # what is left out sits between the quotes, where the candidate cannot write.
    if stream.head:
        lines.append(fenced(stream.head))
    if stream.omitted_bytes:
        lines.append(f"[… {counted(stream.omitted_bytes, 'byte')}{of_text} omitted …]")
    if stream.tail:
        lines.append(fenced(stream.tail))
    return lines + _end_text(stream)


def _as_text(stream: StreamView) -> tuple[str, str]:
    """What the header adds, and the omitted count's unit, when the text is not as long as
    the bytes kept: `omittedBytes` counts the text's UTF-8 (each byte that is not UTF-8 is a
    U+FFFD there, 3 bytes; a leading BOM is dropped), every other count the bytes written."""
    text = len(stream.head.encode("utf-8")) + stream.omitted_bytes
    text += len(stream.tail.encode("utf-8"))
    if text == min(stream.captured_bytes, OUTPUT_CAP_BYTES):
        return "", ""
    said = (
        f"; as text {counted(text, 'byte')} of UTF-8, each byte that is not UTF-8 shown as "
        "U+FFFD (3 bytes): the count omitted is of the text"
    )
    return said, " of the text"


def _end_text(stream: StreamView) -> list[str]:
    """The stream's end past the kept bytes, after a count of those it does not show."""
    if not stream.end and not stream.end_omitted_bytes:
        return []
    past = f"written past the kept {stream.captured_bytes:,}"
    if not stream.end_omitted_bytes:
        return [f"[… then the bytes {past}: …]", fenced(stream.end)]
    lines = [f"[… {counted(stream.end_omitted_bytes, 'byte')} {past}, not shown …]"]
    return lines + ([fenced(stream.end)] if stream.end else [])
