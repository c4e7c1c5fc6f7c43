"""One verdict of `jigcmd verify`, and the lookups every evidence check shares."""

from __future__ import annotations

from dataclasses import dataclass

from jigcmd.attest.statement import (
    JarvisRunStatement,
    JarvisRunStatementV2,
    ResourceDescriptor,
    RunStatement,
)

__all__ = ["Check", "Statement", "candidate", "skip", "subject"]

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
