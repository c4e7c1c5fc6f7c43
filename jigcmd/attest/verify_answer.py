"""What `jigcmd verify` checks of an answer around the evidence it carries.

The evidence is checked elsewhere (`verify.py`, `verify_view.py`); this is the rest of the
answer, so that "verified" speaks of the whole of it. An MCP result: `isError` and the error
code (how the statement says the call ended: a completed command is no error whatever its
exit, a deadline's or a cancel's stop is one), `_meta`'s report (the signed resource report)
and attestation (this statement's run, operation and bundle), and the text the model reads
(the words of the checked result). A `jigcmd run --json` answer: its report, its copy of the
statement, its error's code. A Run/1 error: its codes. What no signature binds (words,
links, a trace, the runner's test view) and each field jigcmd never writes is a skipped
check naming it: never passed over in silence.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from jigcmd.attest import dsse
from jigcmd.attest.checks import Check, carried_bundle, skip
from jigcmd.attest.inputs import Around
from jigcmd.attest.statement import RunStatement
from jigcmd.protocol import jsonrpc
from jigcmd.protocol.invocation import cut_count
from jigcmd.protocol.mcp_results import view_text
from jigcmd.protocol.mcp_view import View

__all__ = ["around_checks"]

# The error a stop reason is answered with (a run that exited is no error).
_ERROR_OF = {"exited": None, "deadline": "DEADLINE_EXCEEDED", "cancelled": "CANCELLED"}
# jigcmd's own `_meta` keys, in either era's spelling (`dev.jigcmd/…` from 2026-07-28).
_OWN_META = ("jigcmd/", "dev.jigcmd/")
# `_meta` keys jigcmd writes that no signature binds: the caller's trace handed back, and
# the server's identity (2026-07-28).
_UNSIGNED_META = ("traceparent", "tracestate", "io.modelcontextprotocol/serverInfo")


def around_checks(
    statement: RunStatement, around: Around, bundle: bytes
) -> tuple[list[Check], list[str]]:
    """The answer around the evidence against the statement: a check of each part it signs,
    a skip of each it does not; and the paths of the fields jigcmd never writes there."""
    checker: Callable[[RunStatement, Around, bytes], tuple[list[Check], list[str]]] = {
        "mcp": _mcp,
        "run --json": _run_json,
        "Run/1 error": _run1_error,
    }[around.shape]
    return checker(statement, around, bundle)


def _mcp(statement: RunStatement, around: Around, bundle: bytes) -> tuple[list[Check], list[str]]:
    result, at = around.value, around.at
    expected = _ERROR_OF[statement.predicate.ending.stop_reason]
    checks = [_is_error(result.get("isError"), expected, statement)]
    meta = result.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    own, twice = _own_keys(meta)
    checks += twice
    code_check, said_code = _mcp_error(own.get("error"), expected, at)
    checks += code_check
    report = own.get("report")
    checks.append(_report(statement, report[1] if report else None, "the result's _meta"))
    checks.append(_named_statement(statement, own.get("attestation"), bundle))
    invocation = statement.predicate.command.invocation
    checks += _content(
        result.get("content"), result.get("structuredContent"), said_code, invocation
    )
    unsigned = [f"{at}._meta.{key}" for key in meta if key in _UNSIGNED_META]
    if unsigned:
        checks.append(skip("_meta", ", ".join(unsigned) + ": the server's, not signed"))
    known = {"error", "report", "attestation"}
    unknown = [f"{at}._meta.{key}" for key, _ in own.values() if key.split("/", 1)[1] not in known]
    unknown += [f"{at}._meta.{key}" for key in meta if not _own(key) and key not in _UNSIGNED_META]
    fields = ("isError", "content", "structuredContent", "_meta")
    unknown += [f"{at}.{key}" for key in result if key not in fields and key != "resultType"]
    if result.get("resultType", "complete") != "complete":
        unknown.append(f"{at}.resultType {jsonrpc.encode_json(result['resultType']).decode()}")
    return checks, unknown


def _own(key: str) -> bool:
    return key.startswith(_OWN_META)


def _own_keys(meta: Mapping[str, object]) -> tuple[dict[str, tuple[str, object]], list[Check]]:
    """jigcmd's `_meta` keys by name (`report`), and a failed check of each name spelt twice.

    jigcmd writes one era's prefix: a second spelling is a copy no reader can tell from the
    first (one reads `jigcmd/`, another `dev.jigcmd/`), so it fails rather than one of the
    two being checked and the other passed over.
    """
    own: dict[str, tuple[str, object]] = {}
    twice: list[Check] = []
    for key, value in meta.items():
        if not _own(key):
            continue
        name = key.split("/", 1)[1]
        if name in own:
            why = f"both {own[name][0]} and {key}: jigcmd writes one era's prefix, never both"
            twice.append(Check("_meta", False, why))
            continue
        own[name] = (key, value)
    return own, twice


def _is_error(said: object, expected: str | None, statement: RunStatement) -> Check:
    """`isError` as the statement says the call ended: an error only when it was stopped."""
    stop = statement.predicate.ending.stop_reason
    if said is None:
        # MCP reads an absent `isError` as false: the result says the call was no error.
        if expected is None:
            return Check("isError", True, f"absent (false), as a call that ended {stop!r} is")
        why = f"absent, which MCP reads as false, but the call was stopped ({stop!r}), an error"
        return Check("isError", False, why)
    if said is (expected is not None):
        return Check("isError", True, f"{str(said).lower()}, as a call that ended {stop!r} is")
    ended = (
        "completed (an error only when stopped, never for its exit)"
        if expected is None
        else f"was stopped ({stop!r}), an error"
    )
    shown = jsonrpc.encode_json(said).decode()
    return Check("isError", False, f"the result says isError {shown}, but the call {ended}")


def _mcp_error(
    named: tuple[str, object] | None, expected: str | None, at: str
) -> tuple[list[Check], str | None]:
    """`_meta`'s error code as the statement's stop reason says it; its details unsigned."""
    if named is None:
        if expected is None:
            return [], None
        why = f"the result names no error code: the signed stop ({expected}) is unchecked"
        return [skip("error", why)], None
    key, value = named
    error = value if isinstance(value, dict) else {}
    code = error.get("code")
    if expected is None or code != expected:
        should = "none (the command completed)" if expected is None else expected
        why = f"the result's _meta {key} code is {code!r}, but the statement's is {should}"
        return [Check("error", False, why)], None
    checks = [Check("error", True, f"{code}, as the statement's stop reason says")]
    rest = [f"{at}._meta.{key}.{field}" for field in error if field != "code"]
    if rest:
        checks.append(skip("error details", ", ".join(rest) + ": the server's words, not signed"))
    return checks, code


def _report(statement: RunStatement, report: object, whose: str) -> Check:
    """The answer's resource report is the statement's, every field of it."""
    signed = statement.predicate.ending.resources
    if signed is None:
        return skip("report", "the statement was signed before the resource report: unchecked")
    if report is None:
        return skip("report", f"{whose} report is absent: the signed resource report is unchecked")
    expected: dict[str, Any] = msgspec.to_builtins(signed)
    shown: Mapping[str, Any] = report if isinstance(report, dict) else {}
    # An MCP call's trace context rides in its report too: the caller's, not measured.
    extra = sorted(set(shown) - set(expected) - {"trace"})
    differs = [key for key in expected if shown.get(key, ...) != expected[key]] + extra
    if differs:
        why = f"{whose} report differs from the signed resource report in " + ", ".join(differs)
        return Check("report", False, why)
    traced = "; its trace is the caller's, not signed" if "trace" in shown else ""
    said = ", ".join(expected) + " are the signed resource report's" + traced
    return Check("report", True, said)


def _named_statement(statement: RunStatement, named: object, bundle: bytes) -> Check:
    """`_meta`'s attestation names this statement: its run, its operation, this bundle."""
    if named is None:
        return skip("attestation", "the result names no statement (_meta has no attestation)")
    said = named[1] if isinstance(named, tuple) else None
    fields: Mapping[str, Any] = said if isinstance(said, dict) else {}
    run = statement.predicate.run
    # The digest is of the bundle's bytes (as `run --json`'s `bundle` is compared): this
    # file's, never a form re-encoded from it.
    digest, named_digest = dsse.bundle_digest(bundle), fields.get("digest")
    recoded = None
    with contextlib.suppress(dsse.BundleError):
        recoded = dsse.bundle_digest(dsse.encode_bundle(dsse.decode_bundle(bundle)))
    differs = [
        name
        for name, same in (
            ("runId", fields.get("runId") == run.caller_run),
            ("operationId", fields.get("operationId") == run.operation_id),
            ("digest", named_digest in (digest, recoded)),
        )
        if not same
    ]
    extra = sorted(set(fields) - {"runId", "operationId", "digest"})
    if differs or extra:
        why = (
            "the result's _meta attestation names another statement than this one: it differs "
            "in " + ", ".join(differs + extra)
        )
        return Check("attestation", False, why)
    said = f"run {run.caller_run}, {run.operation_id}"
    if named_digest != digest:
        # Its envelopes written again otherwise (pretty-printed, CRLF, a field added): the
        # signed facts are the same, but this file is not the bundle the digest names.
        why = (
            f"_meta names {said}, but its digest {named_digest} is not this file's bytes "
            f"({digest}): a copy re-encoded (pretty-printed, CRLF, a field added); verify the "
            "bundle as served (`resources/read`, `jigcmd attest`), byte for byte, to check it"
        )
        return skip("attestation", why)
    return Check("attestation", True, f"names this statement: {said}, digest {digest}")


def _content(
    content: object, structured: object, code: str | None, invocation: list[str]
) -> list[Check]:
    """The text the model reads is the words of `structuredContent` (checked above); its
    first line, for an error, the error's code and words; links are the server's."""
    if content is None:
        return [skip("content", "absent: the result carries no text for the model")]
    blocks = content if isinstance(content, list) else []
    texts = [b for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    links = [b for b in blocks if isinstance(b, dict) and b.get("type") == "resource_link"]
    others = len(blocks) - len(texts) - len(links)
    try:
        view = msgspec.convert(_counted(structured, invocation), View)
    except msgspec.ValidationError:
        return [Check("content", False, "structuredContent cannot be put in words to compare")]
    given = texts[0].get("text") if len(texts) == 1 else None
    header = ""
    if code is not None and isinstance(given, str):
        header = given.split("\n", 1)[0]
        if not header.startswith(f"{code}: "):
            header = f"{code}: "
    if not isinstance(given, str) or given != view_text(view, header) or others:
        why = "the text the model reads is not the words of the checked structuredContent"
        return [Check("content", False, why)]
    checks = [Check("content", True, "its text is the words of the checked structuredContent")]
    if header:
        checks.append(skip("content words", f"{header!r}: the error's words, not signed"))
    if links:
        uris = ", ".join(str(link.get("uri")) for link in links)
        why = f"{uris}: the server's links, their words (name, title, description) too, not signed"
        checks.append(skip("content links", why))
    return checks


def _counted(structured: object, invocation: list[str]) -> object:
    """`structuredContent` with its `invocationOmitted`: an older jigcmd's has none, and
    counts the words it leaves out in its list's last item (`invocation.cut_count`)."""
    if not isinstance(structured, dict) or "invocationOmitted" in structured:
        return structured
    shown = structured.get("invocation")
    if not isinstance(shown, list) or not all(isinstance(word, str) for word in shown):
        return structured
    more = cut_count(shown, invocation)
    return {**structured, "invocation": shown[:-1] if more else shown, "invocationOmitted": more}


def _run_json(
    statement: RunStatement, around: Around, bundle: bytes
) -> tuple[list[Check], list[str]]:
    answer, at = around.value, around.at
    expected = _ERROR_OF[statement.predicate.ending.stop_reason]
    checks = _run_json_error(answer.get("error"), expected, at)
    checks.append(_report(statement, answer.get("report"), "the answer's"))
    if "tests" in answer:
        why = (
            "the runner's per-test view, its summary too, is candidate-influenced and not "
            "signed; the test result statement is what binds the tests"
        )
        checks.append(skip("tests", why))
    if "output" in answer:
        why = (
            "each stream past the 64 KiB the evidence keeps (bytes not kept, the last 4 KiB): "
            "kept beside the evidence, not signed"
        )
        checks.append(skip("output", why))
    checks.append(carried_bundle(answer.get("attestation"), bundle, "answer"))
    fields = ("evidence", "report", "tests", "attestation", "error", "output")
    return checks, [f"{at}.{key}" for key in answer if key not in fields]


def _run_json_error(error: object, expected: str | None, at: str) -> list[Check]:
    if error is None:
        if expected is None:
            return []
        return [Check("error", False, f"the answer has no error, but the call was {expected}")]
    said: Mapping[str, Any] = error if isinstance(error, dict) else {}
    if said.get("code") != expected:
        should = "none (the command completed)" if expected is None else expected
        why = f"the answer's error code is {said.get('code')!r}, but the statement's is {should}"
        return [Check("error", False, why)]
    rest = [f"{at}.error.{key}" for key in said if key != "code"]
    checks = [Check("error", True, f"{expected}, as the statement's stop reason says")]
    if rest:
        checks.append(skip("error words", ", ".join(rest) + ": the words, not signed"))
    return checks


def _run1_error(
    statement: RunStatement, around: Around, bundle: bytes
) -> tuple[list[Check], list[str]]:
    error, at = around.value, around.at
    expected = _ERROR_OF[statement.predicate.ending.stop_reason]
    data = error.get("data")
    data = data if isinstance(data, dict) else {}
    code, number = data.get("code"), error.get("code")
    if code != expected or number != jsonrpc.OPERATION_FAILED:
        should = "none (the command completed)" if expected is None else expected
        why = (
            f"the answer's error is {number!r} {code!r}, but the statement's is {should} "
            f"({jsonrpc.OPERATION_FAILED})"
        )
        checks = [Check("error", False, why)]
    else:
        checks = [Check("error", True, f"{code}, as the statement's stop reason says")]
    details = data.get("details")
    unsigned = [f"{at}.message"] if "message" in error else []
    if isinstance(details, dict):
        unsigned += [f"{at}.data.details.{key}" for key in details if key != "command"]
    if unsigned:
        checks.append(skip("error words", ", ".join(unsigned) + ": the words, not signed"))
    unknown = [f"{at}.{key}" for key in error if key not in ("code", "message", "data")]
    unknown += [f"{at}.data.{key}" for key in data if key not in ("code", "details")]
    return checks, unknown
