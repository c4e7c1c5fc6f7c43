"""`jigcmd verify` binds every field of a jarvis record its statement carries.

A `jarvis.run.get` answer edited to another run id, status or matched rule fails the check
that binds it, and the record as jarvis answered it verifies.
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


def _verify(tmp_path: Path, signing: RunSigning, record: dict[str, Any]) -> list[str]:
    (tmp_path / "host.pub").write_bytes(signing.attester.key.public.pem)
    (tmp_path / "b.jsonl").write_text(record["attestation"]["bundle"])
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
