"""What `jigcmd verify` reads as FILE: a bundle, or an answer that carries one.

A bundle is JSON Lines of DSSE envelopes (or one envelope); a `jigcmd run --json` answer or a
jarvis record carries it in `attestation.bundle`, a key no envelope has. An answer that
carries no statement (a Run/1 or MCP answer, an MCP tool result alone, evidence alone, a
`run --json` answer of a run that never ran to a signed end) is not what FILE takes:
`ValueError` says what it is and where its statement is, rather than a failed bundle check
of the wrong file; and so is a file that is no bundle at all. Read strictly
(`jsonio.strict`), every line of the bundle too.
"""

from __future__ import annotations

from typing import Any

from jigcmd.attest import dsse
from jigcmd.jsonio import strict

__all__ = ["bundle_bytes", "carries_evidence"]

# Where a statement of the call is fetched from: its operation's, by the run that made it.
_ATTEST = "`jigcmd attest --run-id RUN OPERATION`"


def bundle_bytes(data: bytes) -> bytes:
    """The bundle in `data`: the file itself, or an answer's `attestation.bundle`.

    `ValueError` when it is an answer carrying no statement, or when the file or a line of
    its bundle is JSON that breaks a strict rule.
    """
    try:
        value = strict.loads(data)
    except strict.Malformed:
        # JSON Lines of several envelopes: each line is held to the strict rules here, the
        # rest of what is wrong is the bundle check's to say.
        return _strict_lines(data)
    except strict.StrictJSONError as exc:
        raise ValueError(f"not strict JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(
            f"not a bundle: the file is a JSON {_json_kind(value)}, not a DSSE envelope (an "
            "object) or JSON Lines of them"
        )
    if "attestation" not in value:
        unsigned = _carries_no_statement(value)
        if unsigned is not None:
            raise ValueError(f"not a bundle: {unsigned}")
        return _strict_lines(data)
    attestation = value["attestation"]
    if attestation is None:
        raise ValueError("the answer's `attestation` is null: no statement was made for this run")
    bundle = attestation.get("bundle") if isinstance(attestation, dict) else None
    if not isinstance(bundle, str):
        raise ValueError("the answer's `attestation` has no `bundle` string")
    return _strict_lines(bundle.encode("utf-8"))


def carries_evidence(data: bytes) -> bool:
    """Whether FILE is an answer carrying both its statement and its evidence (a `run --json`
    answer with `evidence`, a jarvis record): then it is its own evidence, checked whole."""
    try:
        value = strict.loads(data)
    except strict.StrictJSONError:
        return False
    return (
        isinstance(value, dict)
        and isinstance(value.get("attestation"), dict)
        and ("evidence" in value or "run_id" in value)
    )


def _carries_no_statement(value: dict[str, Any]) -> str | None:
    """What an answer with no `attestation` is, and where its statement is; None for an
    object that may be a DSSE envelope (the bundle check says what is wrong with it)."""
    if any(key in value for key in ("payload", "payloadType", "signatures")):
        return None
    result = value.get("result")
    if "jsonrpc" in value and isinstance(result, dict) and "value" not in result:
        return (
            "an MCP tools/call answer, which carries no statement: fetch it with "
            f'{_ATTEST} (the ids its `_meta["jigcmd/attestation"]` names) or resources/read '
            "of its `attestation` link, and give this answer as --evidence"
        )
    if "jsonrpc" not in value and ("structuredContent" in value or "content" in value):
        return (
            "an MCP tool result, which carries no statement: fetch it with "
            f'{_ATTEST} (the ids its `_meta["jigcmd/attestation"]` names) and give this '
            "result as --evidence"
        )
    if "jsonrpc" in value:
        return (
            "a FLOW Run/1 answer line, which carries no statement: fetch it with "
            f"{_ATTEST} (the run id `serve` was given, the call's operationId) and give this "
            "answer as --evidence"
        )
    if "run_id" in value:
        return "a jarvis run record with no `attestation`: jarvis signed nothing for this run"
    if "budgetBytes" in value:
        return (
            "an MCP structuredContent, which carries no statement: fetch it with "
            f"{_ATTEST} and give this as --evidence"
        )
    if "evidence" in value or "error" in value:
        error = value.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        why = f" ({code}: nothing ran to a signed end)" if code and "evidence" not in value else ""
        return f"a `jigcmd run --json` answer with no `attestation`{why}: it carries no statement"
    if "candidateDigest" in value:
        return (
            f"jigcmd evidence, which carries no statement: give it as --evidence, and as FILE "
            f"the bundle ({_ATTEST})"
        )
    return None


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    return "null" if value is None else "boolean" if isinstance(value, bool) else "number"


def _strict_lines(bundle: bytes) -> bytes:
    """`bundle`, if it is one: else `ValueError` naming what it is (a line that breaks a strict
    JSON rule, text, an empty or cut-short file, an object that is no DSSE envelope).

    Status 2, as for any input verify cannot use, rather than a failed `bundle` check: a
    failed check (status 1) is a statement read and found not to hold, never a file that
    holds none.
    """
    try:
        dsse.decode_bundle(bundle)
    except dsse.NotStrictJSON as exc:
        raise ValueError(str(exc)) from None
    except dsse.BundleError as exc:
        raise ValueError(f"not a bundle: {exc}") from None
    return bundle
