"""`jigcmd attest`, `jigcmd verify` and `jigcmd key`: a run's signed statement, checked.

`attest` prints (or writes) the statement the journal keeps for one operation: 0 written;
1 that operation has none (unknown, failed, uncertain or still running: the reason on
stderr); 2 the state directory could not be used (a `--state-dir` that does not exist
included: reading creates nothing) or `--run-id` is not a run id. `verify` prints one line
per check and exits 0 when every check holds, 1 when one fails, 2 when a file cannot be
read or is not what it takes (a FILE holding no bundle too: nothing is checked); an answer
carrying its statement and its evidence, given as FILE alone, is its own evidence;
`--run-id`, `--operation-id` and `--lock` are the caller's own, which the statement must
name. `key` prints the public half of the key this host signs
with (PEM on stdout, its id on stderr), making it on first use; a `--state-dir` that does not
exist is refused (2), only the default directory is made.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from jigcmd.attest.bundlefile import bundle_bytes, carries_evidence
from jigcmd.attest.checks import Check, skip
from jigcmd.attest.hostpublic import load_host_public
from jigcmd.attest.inputs import INPUT_MAX_BYTES, EvidenceFile, read_evidence
from jigcmd.attest.keys import (
    HOST_PUBLIC_NAME,
    PublicKey,
    SigningKeyError,
    load_public,
    named_signing_key,
    open_signing_key,
)
from jigcmd.attest.verify import Expected, verify_bundle
from jigcmd.durable.host import state_directory
from jigcmd.durable.statedir import (
    StateDirError,
    checked_state_dir,
    default_state_dir,
    unmade_state_dir,
)
from jigcmd.journal.presence import holds_journal
from jigcmd.journal.rows import Row
from jigcmd.journal.schema import SchemaError
from jigcmd.journal.store import Journal, JournalError, JournalUnusable
from jigcmd.policy.lock import LockError, decode_lock
from jigcmd.protocol import jsonrpc

__all__ = ["Expecting", "attest", "key", "verify"]

_OK, _NONE, _UNUSABLE = 0, 1, 2


def attest(state_dir: Path | None, root_run: str, operation_id: str, out: Path | None) -> int:
    """Print or write the statement of `operation_id` in the caller's run `root_run`."""
    if not jsonrpc.is_run1_id(root_run):
        # `--run-id "$RUN"` with RUN unset: a usage error, not a run without the operation.
        sys.stderr.write(
            f"jigcmd attest: --run-id {root_run!r} must match {jsonrpc.RUN1_ID_RULE}: the run "
            "id `serve` was given or printed\n"
        )
        return _UNUSABLE
    try:
        state, row = _recorded(state_dir, operation_id, root_run)
    except (StateDirError, JournalError, JournalUnusable, SchemaError) as exc:
        sys.stderr.write(f"jigcmd attest: {exc}\n")
        return _UNUSABLE
    named = f"operation {operation_id!r} of run {root_run!r}"
    if row is None:
        sys.stderr.write(f"jigcmd attest: no {named} in {state}\n")
        return _NONE
    why = _no_statement(row)
    if why is not None or row.attestation is None:
        sys.stderr.write(f"jigcmd attest: {named} has no statement: {why or 'none was kept'}\n")
        return _NONE
    if out is None:
        sys.stdout.buffer.write(row.attestation)
        return _OK
    try:
        out.write_bytes(row.attestation)
    except OSError as exc:
        sys.stderr.write(f"jigcmd attest: {out}: cannot be written: {exc.strerror}\n")
        return _UNUSABLE
    return _OK


def _recorded(state_dir: Path | None, operation_id: str, root_run: str) -> tuple[Path, Row | None]:
    """The state directory and the operation's row, if its journal has one; creates nothing.

    Raises `StateDirError` for a `--state-dir` that does not exist (a typo, most likely) or
    that is not safe to read; a default directory or journal not made yet holds no row.
    """
    state = state_dir or default_state_dir()
    if not os.path.lexists(state):
        if state_dir is not None:
            raise StateDirError(
                f"--state-dir {state_dir}: no such directory, so no statement in it (nothing "
                "was created)",
                "give the state directory `jigcmd serve` used",
            )
        return state, None
    state = checked_state_dir(state)
    if not holds_journal(state):
        return state, None
    # Read only: on a read-only mount too (a node lost, its disk kept), and changing nothing.
    with Journal.open_read_only(state) as journal:
        return state, journal.get(operation_id, root_run=root_run)


def _no_statement(row: Row) -> str | None:
    """Why a row has no statement (nothing ran to its proved end, or it was pruned), if so."""
    if row.pruned:
        return f"it was {row.reason} (`jigcmd prune`)"
    if row.state == "uncertain":
        return f"its end is uncertain ({row.reason or 'nobody saw it'}); nothing is invented"
    if row.outcome == "failure" and row.attestation is None:
        return "it ended in a failure before anything ran, or with no proved end"
    if row.is_open and row.attestation is None:
        return "it is still running"
    return None


@dataclass(frozen=True)
class Expecting:
    """`verify`'s --run-id, --operation-id and --lock, as given: what the caller knows."""

    run_id: str | None = None
    operation_id: str | None = None
    lock: Path | None = None


def verify(
    bundle: Path,
    key_path: Path | None,
    evidence_path: Path | None,
    state_dir: Path | None,
    expecting: Expecting | None = None,
) -> int:
    """Check `bundle` against the key (and the evidence, and the caller's run); one line per
    check."""
    if str(bundle) == "-" and str(evidence_path) == "-":
        sys.stderr.write("jigcmd verify: only one of FILE and --evidence can be - (stdin)\n")
        return _UNUSABLE
    for option, value in _ids(expecting or Expecting()):
        if not jsonrpc.is_run1_id(value):
            # `--run-id "$RUN"` with RUN unset would check nothing: a usage error, as attest's.
            sys.stderr.write(
                f"jigcmd verify: {option} {value!r} must match {jsonrpc.RUN1_ID_RULE}: the "
                "caller's own id, as it gave it\n"
            )
            return _UNUSABLE
    reading = (expecting or Expecting()).lock or bundle
    try:
        expected = _expected(expecting or Expecting())
        reading = bundle
        given = _read(bundle)
        data = bundle_bytes(given)
        key = _verifying_key(key_path, state_dir)
        evidence: EvidenceFile | None = None
        beside: list[Check] = []
        if evidence_path is not None:
            reading = evidence_path
            answer = _read(evidence_path)
            evidence = read_evidence(answer)
            beside = _answer_beside(given, answer)
        elif carries_evidence(given):
            # An answer carrying its statement is its own evidence: checked whole, its copy
            # of the statement and its report too, not only the bundle inside it.
            evidence = read_evidence(given)
    except OSError as exc:
        sys.stderr.write(f"jigcmd verify: {exc.filename}: cannot be read: {exc.strerror}\n")
        return _UNUSABLE
    except (SigningKeyError, StateDirError, LockError) as exc:
        sys.stderr.write(f"jigcmd verify: {exc}\n")
        return _UNUSABLE
    except ValueError as exc:
        sys.stderr.write(f"jigcmd verify: {reading}: {exc}\n")
        return _UNUSABLE
    checks = verify_bundle(data, key, evidence, expected) + beside
    for check in checks:
        verdict = "skip" if check.skipped else "ok  " if check.ok else "FAIL"
        sys.stdout.write(f"{verdict} {check.name}: {check.detail}\n")
    # A check not made (`skip`) is no failure: exit 0 means every check made held, and the
    # skip lines say what was not (a gate that must bind the output passes --evidence).
    good = all(check.ok for check in checks)
    sys.stdout.write("verified\n" if good else "NOT verified\n")
    return _OK if good else _NONE


def _ids(expecting: Expecting) -> list[tuple[str, str]]:
    named = (("--run-id", expecting.run_id), ("--operation-id", expecting.operation_id))
    return [(option, value) for option, value in named if value is not None]


def _expected(expecting: Expecting) -> Expected:
    """What the caller gave of its run, its lock read (`LockError` naming the file if no lock)."""
    lock = None
    if expecting.lock is not None:
        data = _read(expecting.lock)
        lock = (data, decode_lock(data, source=f"--lock {expecting.lock}"), str(expecting.lock))
    return Expected(expecting.run_id, expecting.operation_id, lock)


def _answer_beside(given: bytes, evidence: bytes | None) -> list[Check]:
    """A skip naming FILE's answer around its bundle when another file is the evidence."""
    if evidence is None or evidence == given or not carries_evidence(given):
        return []
    why = (
        "FILE is an answer, but --evidence is another file: only FILE's attestation.bundle was "
        "read, its evidence, report and copy of the statement unchecked (verify FILE alone to "
        "check it whole)"
    )
    return [skip("FILE's answer", why)]


def _read(path: Path) -> bytes:
    """A file's bytes, at most `INPUT_MAX_BYTES`; `-` is stdin, as for `run --stdin-file -`.

    Read to that bound and no further: `/dev/zero`, or a file far larger than anything jigcmd
    writes, is refused (`ValueError`), never read until memory runs out.
    """
    if str(path) == "-":
        data = sys.stdin.buffer.read(INPUT_MAX_BYTES + 1)
    else:
        with open(path, "rb") as file:
            data = file.read(INPUT_MAX_BYTES + 1)
    if len(data) > INPUT_MAX_BYTES:
        raise ValueError(
            f"more than {INPUT_MAX_BYTES >> 20} MiB (or endless): larger than any bundle or "
            "answer jigcmd writes, so not one; give the bundle (`jigcmd attest`) or the answer "
            "as it came"
        )
    return data


def _verifying_key(key_path: Path | None, state_dir: Path | None) -> PublicKey:
    if key_path is not None:
        return load_public(key_path)
    # The host's own public half: a reviewer on this host needs no key file of their own.
    # Read where it is, never made: verifying creates nothing. Trusted only from a state
    # directory every other verb would use: one that another user owns or may write could
    # hold their key, and a bundle they signed would verify.
    state = state_dir or default_state_dir()
    if not os.path.lexists(state):
        public = state / HOST_PUBLIC_NAME
        raise SigningKeyError(f"no host key at {public}; pass --key PUB (`jigcmd key` prints it)")
    try:
        trusted = checked_state_dir(state)
    except StateDirError as exc:
        raise SigningKeyError(
            f"the host key in {state} is not trusted: {exc.reason}; pass --key PUB (the "
            "signer's public key, which `jigcmd key` prints on its host)"
        ) from None
    host = load_host_public(trusted)
    if host.unchecked is not None:
        # Trusted with nothing to hold it against: said, never silent (the doctor says it too).
        sys.stderr.write(
            f"jigcmd verify: warning: {host.unchecked}; --key PUB names the key you trust\n"
        )
    return host.key


def key(state_dir: Path | None, signing_key: Path | None) -> int:
    """Print the public half of the signing key (made on first use when it is the host's)."""
    try:
        # A named key is the one serve signs with: no state directory is read or made for it.
        signing = named_signing_key(signing_key)
        if signing is None:
            if state_dir is not None and not os.path.lexists(state_dir):
                # A mistyped `--state-dir` would get a brand-new key, printed as the host's
                # (in a rotation, archived as the retired one): refused, as attest and runs do.
                sys.stderr.write(_not_there(state_dir))
                return _UNUSABLE
            signing = open_signing_key(state_directory(state_dir))
    except (SigningKeyError, StateDirError) as exc:
        sys.stderr.write(f"jigcmd key: {exc}\n")
        return _UNUSABLE
    public = signing.public
    if signing.replaced is not None:
        # `verify` without --key trusted that file: what it held is said, not lost unsaid.
        sys.stderr.write(f"jigcmd key: warning: {signing.replaced}: written again with its own\n")
    sys.stdout.buffer.write(public.pem)
    sys.stderr.write(f"key id: {public.keyid} ({signing.source})\n")
    return _OK


def _not_there(state_dir: Path) -> str:
    """Key's refusal of a missing `--state-dir`, its fix judged as serve would make the path."""
    said = (
        f"jigcmd key: --state-dir {state_dir}: it does not exist (nothing was created, no key made)"
    )
    try:
        unmade_state_dir(state_dir)
    except StateDirError as exc:
        # A mkdir here would only meet serve's refusal (a parent others may write, a file on
        # the way): serve's reason and fix instead, as the doctor gives them.
        return f"{said}, and serve would refuse to make it: {exc}\n"
    return (
        f"{said}; give the state directory `jigcmd serve` uses, or create it first "
        f"(mkdir -p -m 700 {shlex.quote(str(state_dir))}, or start `jigcmd serve` with it "
        "once) to make a new host key there\n"
    )
