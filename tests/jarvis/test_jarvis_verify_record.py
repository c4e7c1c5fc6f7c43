"""`jigcmd verify` binds every field of a jarvis record its statement carries, and says the rest.

A `jarvis.run.get` answer edited to another run id, status, matched rule, timing or digest
fails the check that binds it; what no signature binds (`detail`, the row's own times, a
field jarvis never writes) is a `skip` line; the record as jarvis answered it verifies.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from jigcmd.attest.attester import Attester
from jigcmd.attest.keys import SigningKey
from jigcmd.jarvis.statements import RunSigning
from tests.jarvis.jarvis_harness import SpyExecutor, harness, make_service

POLICY_DIGEST = "sha256:" + "9" * 64


def _verify(
    tmp_path: Path, signing: RunSigning, record: dict[str, Any], bundle: str | None = None
) -> list[str]:
    (tmp_path / "host.pub").write_bytes(signing.attester.key.public.pem)
    (tmp_path / "b.jsonl").write_text(bundle or record["attestation"]["bundle"])
    (tmp_path / "record.json").write_text(json.dumps(record))
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "verify", str(tmp_path / "b.jsonl"),
         "--key", str(tmp_path / "host.pub"), "--evidence", str(tmp_path / "record.json")],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize(
    ("edit", "failed"),
    [
        ({}, None),
        ({"run_id": 2}, "FAIL run: the record's run_id 2 is not the statement's 1"),
        ({"status": "failed"}, "FAIL ending: the record differs from the statement in status"),
        ({"matched_rule": "other"}, "FAIL policy: the record's matched_rule 'other', not 'echo'"),
    ],
)
async def test_an_edited_run_get_record_fails_the_check_binding_it(
    tmp_path: Path, edit: dict[str, Any], failed: str | None
) -> None:
    """run_id, status and matched_rule are the statement's run id, stop reason and rule."""
    signing = RunSigning(Attester(SigningKey(Ed25519PrivateKey.generate(), "test")), POLICY_DIGEST)
    async with harness(make_service(SpyExecutor(), signing=signing)) as h:
        created = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
        got = (await h.invoke("jarvis.run.get", run_id=created["run_id"])).json()
    assert got["run_id"] == 1
    lines = _verify(tmp_path, signing, {**got, **edit})
    if failed is None:
        assert lines[-1] == "verified", lines
        assert {line.split(":")[0] for line in lines} >= {"ok   run", "ok   policy", "ok   ending"}
    else:
        assert failed in lines, lines
        assert lines[-1] == "NOT verified"


def _tampered_digest(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "attestation": {**record["attestation"], "digest": "sha256:" + "0" * 64}}


@pytest.mark.parametrize(
    ("edit", "failed"),
    [
        ({"wall_ms": 2.5}, "FAIL timings: the record differs from the statement in wall_ms"),
        ({"setup_ms": 2.5}, "FAIL timings: the record differs from the statement in setup_ms"),
        ({"finished_unix_ms": 1}, "FAIL timings: the record differs from the statement in "),
        ({"reason": "approved"}, "FAIL policy: the record differs from the statement in reason"),
        (_tampered_digest, "FAIL attestation: the record's attestation is not the verified "),
    ],
    ids=["wall_ms", "setup_ms", "finished_unix_ms", "reason", "attestation.digest"],
)
async def test_a_record_edited_in_a_signed_timing_reason_or_digest_fails(
    tmp_path: Path, edit: Any, failed: str
) -> None:
    """wall and setup time are the signed resource report's, the reason the policy's, and
    the record's own attestation is the bundle verified."""
    signing = RunSigning(Attester(SigningKey(Ed25519PrivateKey.generate(), "test")), POLICY_DIGEST)
    async with harness(make_service(SpyExecutor(), signing=signing)) as h:
        created = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
        got = (await h.invoke("jarvis.run.get", run_id=created["run_id"])).json()
    edited = edit(got) if callable(edit) else {**got, **edit}
    lines = _verify(tmp_path, signing, edited)
    assert any(line.startswith(failed) for line in lines), lines
    assert lines[-1] == "NOT verified"


@pytest.mark.parametrize(
    ("edit", "skipped"),
    [
        ({}, "skip detail: jarvis's own words on how the run ended, not signed"),
        ({"detail": "ok"}, "skip detail: jarvis's own words on how the run ended, not signed"),
        ({"created_unix_ms": 1}, "skip created_unix_ms, finished_unix_ms: the journal row's own"),
        ({"note": "reviewed and approved"}, "skip unknown fields: not fields of a jarvis record"),
    ],
    ids=["as-answered", "detail", "created_unix_ms", "unknown-field"],
)
async def test_what_no_signature_binds_is_said_skipped(
    tmp_path: Path, edit: dict[str, Any], skipped: str
) -> None:
    """detail, the row's own times and fields jarvis never writes: a skip line each, and the
    signed ones (timings, policy, attestation) checked."""
    signing = RunSigning(Attester(SigningKey(Ed25519PrivateKey.generate(), "test")), POLICY_DIGEST)
    async with harness(make_service(SpyExecutor(), signing=signing)) as h:
        created = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
        got = (await h.invoke("jarvis.run.get", run_id=created["run_id"])).json()
    lines = _verify(tmp_path, signing, {**got, **edit})
    assert any(line.startswith(skipped) for line in lines), lines
    assert {line.split(":")[0] for line in lines} >= {"ok   timings", "ok   attestation"}
    if "note" in edit:
        assert any(line.endswith("$.note") for line in lines), lines
    assert lines[-1] == "verified", lines


_STRIPPED = (
    "argv", "cwd", "executable", "matched_rule", "wall_ms", "setup_ms",
    "created_unix_ms", "finished_unix_ms", "detail", "attestation",
)  # fmt: skip


async def test_a_record_stripped_of_signed_facts_says_each_one_it_could_not_check(
    tmp_path: Path,
) -> None:
    """Request, policy and timing fields removed: a skip line names each, never only ok lines."""
    signing = RunSigning(Attester(SigningKey(Ed25519PrivateKey.generate(), "test")), POLICY_DIGEST)
    async with harness(make_service(SpyExecutor(), signing=signing)) as h:
        created = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
        got = (await h.invoke("jarvis.run.get", run_id=created["run_id"])).json()
    stripped = {key: value for key, value in got.items() if key not in _STRIPPED}
    lines = _verify(tmp_path, signing, stripped, got["attestation"]["bundle"])
    said = "signed, but not checked against it"
    assert f"skip request: the record has no argv, cwd, executable: {said}" in lines, lines
    assert f"skip policy: the record has no matched_rule: {said}" in lines, lines
    assert f"skip timings: the record has no wall_ms, setup_ms: {said}" in lines, lines
    assert lines[-1] == "verified", lines
