"""What `jigcmd verify` checks of an MCP result's `structuredContent` against a run statement.

The result is the evidence cut to a budget (`jigcmd/protocol/mcp_view.py`): each field it
carries that the statement binds is checked, a stream's head and tail against its digest or,
when bytes are left out between them, against the signed byte count; what no signature binds
(the cut, the budget, the server's links, the runner's test view) is a skipped check.
"""

from __future__ import annotations

import hashlib

from jigcmd.attest.checks import Check, candidate, skip, subject
from jigcmd.attest.inputs import McpResult, McpView
from jigcmd.attest.statement import RunStatement, StreamFacts
from jigcmd.evidence import OUTPUT_CAP_BYTES, ResourceReport
from jigcmd.protocol.counts import counted
from jigcmd.protocol.invocation import cut_count
from jigcmd.protocol.mcp_view import StreamView

__all__ = ["view_checks"]

# The UTF-8 byte order mark a stream's text drops when it starts with one.
_BOM = "\ufeff".encode()


def view_checks(statement: RunStatement, result: McpResult) -> list[Check]:
    """An MCP result against the statement: each field it carries that the statement binds,
    and, said as skipped, what its cut leaves out and what the statement does not bind."""
    view = result.view
    checks = [candidate(statement, view.candidate_digest)]
    ending = statement.predicate.ending
    for name, stream, facts in (
        ("stdout", view.stdout, ending.stdout),
        ("stderr", view.stderr, ending.stderr),
    ):
        checks.extend(_view_stream(statement, name, stream, facts))
    checks.append(_view_ending(statement, view))
    checks.extend(_view_unbound(statement, view))
    if view.tests is not None:
        checks.append(
            skip(
                "tests",
                "the runner's per-test view is candidate-influenced and not signed; the "
                "test result statement is what binds the tests",
            )
        )
    if result.unknown:
        why = "not fields of jigcmd's result, so no fact of the run: " + ", ".join(result.unknown)
        checks.append(skip("unknown fields", why))
    return checks


def _view_stream(
    statement: RunStatement, name: str, stream: StreamView, facts: StreamFacts
) -> list[Check]:
    signed = subject(statement, name)
    digest = stream.sha256.removeprefix("sha256:")
    differs = [
        field
        for field, same in (
            ("sha256", signed is not None and signed.digest.get("sha256") == digest),
            ("capturedBytes", stream.captured_bytes == facts.captured_bytes),
            ("truncated", stream.truncated == facts.truncated),
        )
        if not same
    ]
    if differs:
        return [Check(name, False, f"the result's {name} differs in " + ", ".join(differs))]
    beyond = _impossible_end(stream)
    if beyond is not None:
        return [Check(name, False, f"the result's {name} {beyond}")]
    said = f"sha256 (of the text), {stream.captured_bytes} captured bytes and truncation match"
    if stream.omitted_bytes == 0:
        # Head and tail say they are the whole text: the digest holds them to it.
        shown = hashlib.sha256((stream.head + stream.tail).encode("utf-8")).hexdigest()
        if digest != shown:
            why = f"the result's {name} head and tail are not the signed text"
            return [Check(name, False, why)]
        unsummed = _unsummed(stream)
        if unsummed is not None:
            return [Check(name, False, f"the result's {name} {unsummed}")]
        return [Check(name, True, said + "; head and tail are the whole text")]
    impossible = _impossible_cut(stream, facts)
    if impossible is not None:
        return [Check(name, False, f"the result's {name} head, tail and omittedBytes {impossible}")]
    unsummed = _unsummed(stream)
    if unsummed is not None:
        return [Check(name, False, f"the result's {name} {unsummed}")]
    why = (
        f"head and tail leave out {counted(stream.omitted_bytes, 'byte')} of text between them, "
        "so only the digest "
        "binds the text: head and tail are unchecked beyond fitting the captured length "
        "(resources/read of the stream's uri returns all of it, to hold to the digest)"
    )
    return [Check(name, True, said), skip(f"{name} head/tail", why)]


def _unsummed(stream: StreamView) -> str | None:
    """Why `textBytes` is not what head, `omittedBytes` and tail add up to; None when it is
    (or is absent: a result an older jigcmd made). Not signed, but said to be that sum."""
    parts = len(f"{stream.head}{stream.tail}".encode()) + stream.omitted_bytes
    if stream.text_bytes is None or stream.text_bytes == parts:
        return None
    return (
        f"textBytes {stream.text_bytes} is not what head, omittedBytes and tail add up to ({parts})"
    )


def _impossible_cut(stream: StreamView, facts: StreamFacts) -> str | None:
    """Why head, `omittedBytes` and tail cannot be the text of the signed captured bytes.

    The text is the retained bytes (at most `OUTPUT_CAP_BYTES`) decoded with replacement,
    a leading BOM dropped (`evidence.decode_output`): a character other than U+FFFD is its
    own UTF-8 bytes, a U+FFFD (3 bytes) stands for 1 to 3 of them, and the BOM's 3 are the
    only bytes with no text. So the text is at most 3 bytes short of the retained ones, and
    each part of it needs at least its own bytes less 2 per U+FFFD (a third of the left-out
    bytes, which may all be U+FFFD).
    """
    if stream.omitted_bytes < 0:
        return f"do not add up: omittedBytes {stream.omitted_bytes} is negative"
    retained = min(facts.captured_bytes, OUTPUT_CAP_BYTES)
    head, tail = stream.head.encode("utf-8"), stream.tail.encode("utf-8")
    text = len(head) + stream.omitted_bytes + len(tail)
    if text + len(_BOM) < retained:
        return f"add up to {counted(text, 'byte')} of text, too few for the {retained} captured"
    fewest = _fewest_bytes(stream.head) + -(-stream.omitted_bytes // 3)
    fewest += _fewest_bytes(stream.tail)
    if fewest > retained:
        return f"need at least {fewest} captured bytes, more than the {retained} captured"
    return None


def _impossible_end(stream: StreamView) -> str | None:
    """Why the stream's end past the cap cannot be what the signed count and truncation say.

    Not truncated, the command wrote what was captured and nothing past it. Truncated, it
    wrote at least that, and the end shown and the bytes left out before it are among the
    bytes past the cap (a U+FFFD of the end stands for one of them, `outcomes._end`). The
    end's text and the written count are otherwise unsigned (`_view_unbound`).
    """
    written, captured = stream.written_bytes, stream.captured_bytes
    if not stream.truncated:
        if written not in (None, captured) or stream.end or stream.end_omitted_bytes:
            kept = counted(captured, "byte")
            return f"says it wrote past the cap, yet it kept all it captured ({kept})"
        return None
    if written is None:
        # A run an older jigcmd recorded: no end known, none shown.
        if stream.end or stream.end_omitted_bytes:
            return "shows an end past the cap without the count written"
        return None
    past = written - captured
    shown = _fewest_bytes(stream.end) + stream.end_omitted_bytes
    if past < 0 or stream.end_omitted_bytes < 0 or shown > past:
        return (
            f"end does not fit what it says was written: writtenBytes {written}, "
            f"{captured} kept, {stream.end_omitted_bytes} left out before an end of at "
            f"least {_fewest_bytes(stream.end)} bytes"
        )
    return None


def _fewest_bytes(text: str) -> int:
    """The fewest captured bytes `text` decodes from: each U+FFFD may stand for one byte."""
    return len(text.encode("utf-8")) - 2 * text.count("\ufffd")


def _view_ending(statement: RunStatement, view: McpView) -> Check:
    predicate = statement.predicate
    ending = predicate.ending
    compared = [
        ("command", view.command == predicate.command.name),
        ("invocation", _cut_of(view, predicate.command.invocation)),
        ("stdinDigest", view.stdin_digest == predicate.stdin_digest),
        ("exitCode", view.exit_code == ending.exit_code),
        ("signal", view.signal == ending.signal),
        ("stopReason", view.stop_reason == ending.stop_reason),
    ]
    unchecked = ""
    if ending.cleanup == "complete":
        compared.append(("cleanup", view.cleanup == "complete"))
    else:
        unchecked = "; cleanup not checked (signed before the envelope's release was proved)"
    limits, unlimited = _limits_hit(ending.resources, view)
    if limits is not None:
        compared.append(("limitsHit", limits))
    differs = [field for field, same in compared if not same]
    if differs:
        return Check(
            "ending", False, "the result differs from the statement in " + ", ".join(differs)
        )
    said = ", ".join(field for field, _ in compared) + " match"
    return Check("ending", True, said + unchecked + unlimited)


def _view_unbound(statement: RunStatement, view: McpView) -> list[Check]:
    """What the result carries that no signature binds: its cut, its budget, its links, its
    streams' ends past the cap."""
    invocation = statement.predicate.command.invocation
    checks = []
    if view.invocation != invocation:
        # Either cut (long arguments, some left out and counted) or older, its count in it.
        checks.append(
            skip(
                "invocation cut",
                f"cut to the budget: {counted(len(invocation), 'word')} signed, "
                f"{len(view.invocation)} shown, only the kept prefixes are checked",
            )
        )
    for name, stream in (("stdout", view.stdout), ("stderr", view.stderr)):
        if stream.uri is not None:
            why = f"{stream.uri}: the server's link, not signed; hold what it returns to the digest"
            checks.append(skip(f"{name} uri", why))
        if stream.written_bytes is not None and stream.truncated:
            why = (
                f"{stream.written_bytes} written, an end of {len(stream.end)} characters, "
                f"{stream.end_omitted_bytes} bytes before it: what the host kept past the "
                "cap, not signed; only checked to fit the signed captured bytes"
            )
            checks.append(skip(f"{name} end/writtenBytes/endOmittedBytes", why))
    why = f"{view.budget_bytes}: the size the server cut this result to, not signed"
    checks.append(skip("budgetBytes", why))
    if view.notes:
        why = f"{len(view.notes)}: the server's words on the files sent, not signed"
        checks.append(skip("notes", why))
    return checks


def _limits_hit(resources: ResourceReport | None, view: McpView) -> tuple[bool | None, str]:
    """Whether the result's `limitsHit` is the statement's resource report's, if checkable."""
    if resources is None:
        return None, "; limitsHit not checked (signed before the resource report)"
    hit = [
        n for n, h in (("memory", resources.oom_killed), ("pids", resources.pids_limit_hit)) if h
    ]
    return view.limits_hit == hit, ""


def _cut_of(view: McpView, invocation: list[str]) -> bool:
    """Whether the result's `invocation` is the statement's as an MCP result cuts it to its
    budget: its first words, each cut to a prefix and `…`, and `invocationOmitted` the count
    of the rest (`mcp_view.fitted`); from an older jigcmd, the count the list's last item."""
    shown = view.invocation
    if view.invocation_omitted is None:
        # Read as that result's words read it: an argument shaped like one is an argument.
        more = cut_count(shown, invocation)
        kept = shown[:-1] if more else shown
    else:
        more, kept = view.invocation_omitted, shown
    if more < 0 or len(kept) + more != len(invocation):
        return False
    return all(
        arg == full or (arg.endswith("…") and full.startswith(arg[:-1]) and len(full) >= len(arg))
        for arg, full in zip(kept, invocation, strict=False)
    )
