"""What `jigcmd verify` checks of a jarvis record (a `run.get` or `run.create` answer).

Each field the statement binds is checked: the run id, the streams, the request (argv, cwd,
executable), the policy (decision, matched rule, reason), the ending (status, exit, signal,
truncation), the timings (wall and setup time exactly; the row's own created and finished
times only as bracketing the signed start and finish, which they are not) and the record's
own copy of the statement (the bundle verified, its digest and envelopes). What no
signature binds (`detail`, the row's times, a field jarvis does not write), and each signed
fact the record lacks the field for (a `run.create` answer has no argv, cwd or timings; a
record may have been stripped), is a skipped check, said: never passed over in silence.
"""

from __future__ import annotations

import calendar
import datetime

import msgspec

from jigcmd.attest.checks import Check, carried_bundle, skip, streams
from jigcmd.attest.inputs import JarvisResult, JarvisView
from jigcmd.attest.statement import (
    JarvisRequestFactsV2,
    JarvisRunStatement,
    JarvisRunStatementV2,
)

__all__ = ["record_checks"]

JarvisStatement = JarvisRunStatement | JarvisRunStatementV2


def record_checks(statement: JarvisStatement, result: JarvisResult, bundle: bytes) -> list[Check]:
    """A jarvis record against its statement: each field it carries that the statement binds,
    and, said as skipped, those it does not bind."""
    view = result.view
    checks = [_run(statement, view), *streams(statement, view.stdout, view.stderr)]
    checks += _request(statement, view)
    checks += _policy(statement, view)
    checks.append(_ending(statement, view))
    checks += _timings(statement, view)
    attestation = _attestation(view, bundle)
    if attestation is not None:
        checks.append(attestation)
    if not isinstance(view.created_unix_ms, msgspec.UnsetType) or not isinstance(
        view.finished_unix_ms, msgspec.UnsetType
    ):
        why = (
            "the journal row's own times (begun before the run started, closed after it was "
            "signed), not signed: only checked to bracket startedOn and finishedOn"
        )
        checks.append(skip("created_unix_ms, finished_unix_ms", why))
    if not isinstance(view.detail, msgspec.UnsetType):
        checks.append(skip("detail", "jarvis's own words on how the run ended, not signed"))
    if result.unknown:
        why = "not fields of a jarvis record, so no fact of the run: " + ", ".join(result.unknown)
        checks.append(skip("unknown fields", why))
    return checks


def _run(statement: JarvisStatement, view: JarvisView) -> Check:
    run_id = statement.predicate.run.run_id
    if view.run_id == run_id:
        return Check("run", True, f"run_id {run_id} is the statement's")
    return Check("run", False, f"the record's run_id {view.run_id} is not the statement's {run_id}")


def _request(statement: JarvisStatement, view: JarvisView) -> list[Check]:
    """The record's argv, cwd and executable against the statement's, and those it lacks."""
    request = statement.predicate.request
    compared: list[tuple[str, bool]] = []
    lacks: list[str] = []
    if not isinstance(view.argv, msgspec.UnsetType):
        compared.append(("argv", view.argv == request.argv))
    else:
        lacks.append("argv")
    if not isinstance(view.cwd, msgspec.UnsetType):
        compared.append(("cwd", (view.cwd or "") == request.cwd))
    else:
        lacks.append("cwd")
    unnamed: list[Check] = []
    if isinstance(view.executable, str):
        if isinstance(request, JarvisRequestFactsV2):
            compared.append(("executable", view.executable == request.executable))
        else:
            # Signed before statements named it: nothing to hold the record's against.
            why = (
                f"the record's {view.executable!r}: a jarvis-run/v1 statement names no "
                "executable, so it is not signed"
            )
            unnamed.append(skip("executable", why))
    elif isinstance(request, JarvisRequestFactsV2):
        # Unset, or null: a run recorded before the journal kept it.
        lacks.append("executable")
    return _compared("request", compared, "") + _lacking("request", lacks) + unnamed


def _policy(statement: JarvisStatement, view: JarvisView) -> list[Check]:
    """The record's decision (only an allowed run is signed), matched rule and reason."""
    policy = statement.predicate.policy
    rule = policy.matched_rule
    if not isinstance(view.matched_rule, msgspec.UnsetType) and view.matched_rule != rule:
        return [
            Check("policy", False, f"the record's matched_rule {view.matched_rule!r}, not {rule!r}")
        ]
    compared: list[tuple[str, bool]] = []
    lacks: list[str] = []
    if not isinstance(view.matched_rule, msgspec.UnsetType):
        compared.append((f"matched_rule {rule!r}", True))
    else:
        lacks.append("matched_rule")
    if not isinstance(view.decision, msgspec.UnsetType):
        compared.append(("decision allow", view.decision == "allow"))
    if not isinstance(view.reason, msgspec.UnsetType):
        compared.append(("reason", view.reason == policy.reason))
    return _compared("policy", compared, "") + _lacking("policy", lacks)


def _ending(statement: JarvisStatement, view: JarvisView) -> Check:
    ending = statement.predicate.ending
    # jarvis reports the stop reason as its status: a run with a statement `exited` or
    # `deadline` (a cancelled one is `failed`, and has none).
    compared = [
        ("status", view.status == ending.stop_reason),
        ("exit_code", view.exit_code == ending.exit_code),
        ("signal", view.signal == ending.signal),
        ("stdout.truncated", view.stdout.truncated == ending.stdout.truncated),
        ("stderr.truncated", view.stderr.truncated == ending.stderr.truncated),
    ]
    differs = [name for name, same in compared if not same]
    if differs:
        return Check(
            "ending", False, "the record differs from the statement in " + ", ".join(differs)
        )
    return Check("ending", True, "status, exit code, signal and truncation match")


def _timings(statement: JarvisStatement, view: JarvisView) -> list[Check]:
    """wall_ms and setup_ms are the signed resource report's; the row's created and finished
    times come before the signed start and after the signed finish."""
    predicate = statement.predicate
    resources = predicate.ending.resources
    compared: list[tuple[str, bool]] = []
    lacks: list[str] = []
    for name, shown, signed in (
        ("wall_ms", view.wall_ms, None if resources is None else resources.wall_ms),
        ("setup_ms", view.setup_ms, None if resources is None else resources.setup_ms),
    ):
        if not isinstance(shown, msgspec.UnsetType):
            compared.append((name, shown == signed))
        else:
            lacks.append(name)
    started, finished = _unix_ms(predicate.started_on), _unix_ms(predicate.finished_on)
    bracket: list[tuple[str, bool]] = []
    if not isinstance(view.created_unix_ms, msgspec.UnsetType):
        begun = view.created_unix_ms <= started
        bracket.append((f"created_unix_ms <= startedOn ({started})", begun))
    if not isinstance(view.finished_unix_ms, msgspec.UnsetType):
        closed = view.finished_unix_ms is not None and finished <= view.finished_unix_ms
        bracket.append((f"finishedOn ({finished}) <= finished_unix_ms", closed))
    differs = [field for field, same in compared + bracket if not same]
    if differs:
        why = "the record differs from the statement in " + ", ".join(differs)
        return [Check("timings", False, why)]
    said = [", ".join(field for field, _ in compared) + " match"] if compared else []
    said += [" and ".join(field for field, _ in bracket) + " hold"] if bracket else []
    checked = [Check("timings", True, "; ".join(said))] if said else []
    return checked + _lacking("timings", lacks)


def _attestation(view: JarvisView, bundle: bytes) -> Check | None:
    """The record's own `attestation` is the bundle verified, with its digest and envelopes
    (another bundle is said unchecked: this verify proves nothing of it)."""
    if isinstance(view.attestation, msgspec.UnsetType):
        return None
    return carried_bundle(view.attestation, bundle, "record")


def _compared(name: str, compared: list[tuple[str, bool]], note: str) -> list[Check]:
    """One check of the record's fields `compared` (field, same?); none when it has none."""
    if not compared:
        return []
    differs = [field for field, same in compared if not same]
    if differs:
        why = "the record differs from the statement in " + ", ".join(differs)
        return [Check(name, False, why)]
    return [Check(name, True, ", ".join(field for field, _ in compared) + " match" + note)]


def _lacking(name: str, lacks: list[str]) -> list[Check]:
    """A skip naming the signed facts the record has no field for (none when it lacks none)."""
    if not lacks:
        return []
    fields = ", ".join(lacks)
    return [skip(name, f"the record has no {fields}: signed, but not checked against it")]


def _unix_ms(stamp: str) -> int:
    """A statement's `…T…:…:….mmmZ` time, in milliseconds since the epoch."""
    moment = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")
    return calendar.timegm(moment.timetuple()) * 1000 + moment.microsecond // 1000
