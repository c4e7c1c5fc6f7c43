"""One verdict of `jigcmd verify`, and the lookups every evidence check shares."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from jigcmd.attest.dsse import BundleError, attestation_fields
from jigcmd.attest.statement import (
    JarvisRunStatement,
    JarvisRunStatementV2,
    ResourceDescriptor,
    RunStatement,
)
from jigcmd.evidence import StreamText
from jigcmd.protocol.counts import counted

__all__ = ["Check", "Statement", "candidate", "carried_bundle", "skip", "streams", "subject"]

Statement = RunStatement | JarvisRunStatement | JarvisRunStatementV2


@dataclass(frozen=True)
class Check:
    """One verdict: what was checked, whether it held, and why; or why it was not checked."""

    name: str
    ok: bool
    detail: str
    # Not checked (nothing to check it against): never a failure, but said.
    skipped: bool = False


def skip(name: str, why: str) -> Check:
    """A check not made, and why: never a failure, but said."""
    return Check(name, True, why, skipped=True)


def subject(statement: Statement, name: str) -> ResourceDescriptor | None:
    """The statement's subject called `name`, if it has one."""
    return next((s for s in statement.subject if s.name == name), None)


def candidate(statement: RunStatement, candidate_digest: str) -> Check:
    """Whether `candidate_digest` is the statement's candidate subject."""
    named = subject(statement, "candidate")
    digest = candidate_digest.removeprefix("sha256:")
    if named is not None and named.digest.get("sha256") == digest:
        return Check("candidate", True, f"candidateDigest sha256:{digest} is the subject")
    return Check("candidate", False, f"candidateDigest sha256:{digest} is not the subject")


def streams(statement: Statement, stdout: StreamText, stderr: StreamText) -> list[Check]:
    """Whether each stream's text is the statement's subject of that name (its SHA-256)."""
    checks = []
    for name, stream in (("stdout", stdout), ("stderr", stderr)):
        signed = subject(statement, name)
        actual = hashlib.sha256(stream.text.encode("utf-8")).hexdigest()
        if signed is not None and signed.digest.get("sha256") == actual:
            said = f"its text ({counted(len(stream.text), 'character')}) matches the subject"
            checks.append(Check(name, True, said))
        else:
            checks.append(Check(name, False, f"the evidence's {name} (sha256 {actual}) differs"))
    return checks


def carried_bundle(attestation: object, bundle: bytes, whose: str) -> Check:
    """Whether an answer's own `attestation` (`whose`: "record", "answer") is the bundle
    verified, its digest and envelopes that bundle's; another bundle is said unchecked."""
    if attestation is None:
        return Check("attestation", False, f"the {whose}'s attestation is null: it says unsigned")
    carried = attestation if isinstance(attestation, dict) else {}
    if carried.get("bundle") != bundle.decode("utf-8", "replace"):
        why = (
            f"the {whose} carries another bundle than the one verified here: its statement was "
            f"not checked (verify the {whose} itself as FILE)"
        )
        return skip("attestation", why)
    try:
        expected = attestation_fields(bundle)
    except BundleError:
        return Check("attestation", False, f"the verified bundle is not one a {whose} carries")
    keys = sorted(set(expected) | set(carried))
    differs = [key for key in keys if carried.get(key) != expected.get(key)]
    if differs:
        why = f"the {whose}'s attestation is not the verified bundle's in " + ", ".join(differs)
        return Check("attestation", False, why)
    return Check("attestation", True, "bundle, digest and envelopes are the verified bundle's")
