"""Which key `jigcmd verify` trusts, as an auditor with in-toto's tooling meets it.

A real statement (`jigcmd run --json`, the host key of its state directory) checked with the
securesystemslib recipe docs/attestation.md gives, with a securesystemslib key dict as
`--key`, re-signed by a forger's key (the hint must not steer to trusting it), and against a
state directory whose `signing-key.pub.pem` is another key (verify, key and doctor say so).
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from securesystemslib.signer import SSlibKey

from jigcmd.attest import dsse
from jigcmd.attest.keys import HOST_PUBLIC_NAME
from tests.test_cli_run import answer, jigcmd_cli, lock, run

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py

DOCS = Path(__file__).parents[1] / "docs" / "attestation.md"


@pytest.fixture(scope="module")
def signed(lock: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """The state directory, a `jigcmd run --json` statement's bundle, and `jigcmd key`'s PEM."""
    where = tmp_path_factory.mktemp("signed")
    files = where / "candidate"
    (files / "src").mkdir(parents=True)
    (files / "src" / "cli.ts").write_text('console.log("signed");\n')
    state = where / "state"
    done = run(lock, state, "cli", files, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = where / "bundle.jsonl"
    bundle.write_text(answer(done)["attestation"]["bundle"])
    pem = where / "host.pub"
    printed = jigcmd_cli("key", "--state-dir", str(state), check=True)
    pem.write_text(printed.stdout)
    return state, bundle, pem


def _verify(*args: str) -> subprocess.CompletedProcess[str]:
    return jigcmd_cli("verify", *args)


def test_the_documented_securesystemslib_recipe_verifies_a_real_statement(
    signed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The snippet in docs/attestation.md, run as written, verifies; the obvious call (the
    library's own keyid) does not, which is why the docs give the keyid."""
    _, bundle, pem = signed
    block = DOCS.read_text().split("<!-- sslib-recipe:", 1)[1].split("```python\n", 1)[1]
    (tmp_path / "recipe.py").write_text(block.split("```", 1)[0])
    ran = subprocess.run(
        [sys.executable, str(tmp_path / "recipe.py"), str(bundle), str(pem)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (0, "verified\n"), ran.stderr
    from securesystemslib.dsse import Envelope  # noqa: PLC0415 - test only
    from securesystemslib.exceptions import VerificationError  # noqa: PLC0415 - test only

    public = serialization.load_pem_public_key(pem.read_bytes())
    naive = SSlibKey.from_crypto(public)
    first = Envelope.from_dict(json.loads(bundle.read_text().splitlines()[0]))
    with pytest.raises(VerificationError):
        first.verify([naive], 1)


def test_a_securesystemslib_key_dict_is_taken_as_the_key_it_names(
    signed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """`SSlibKey.to_dict()` of the host key as --key: the same key id, verified; a dict of
    another key type is status 2 naming it."""
    _, bundle, pem = signed
    public = serialization.load_pem_public_key(pem.read_bytes())
    given = tmp_path / "host.sslib.json"
    given.write_text(json.dumps(SSlibKey.from_crypto(public).to_dict()))
    done = _verify(str(bundle), "--key", str(given))
    assert done.returncode == 0, done.stdout + done.stderr
    spki = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    said = f"ok   signature: Ed25519 over DSSE PAE, key {hashlib.sha256(spki).hexdigest()}"
    assert said in done.stdout.splitlines()
    rsa = {"keytype": "rsa", "scheme": "rsassa-pss-sha256", "keyval": {"public": "x"}}
    given.write_text(json.dumps(rsa))
    refused = _verify(str(bundle), "--key", str(given))
    assert (refused.returncode, refused.stdout) == (2, "")
    assert "a securesystemslib key of keytype 'rsa' and scheme 'rsassa-pss-sha256'" in (
        refused.stderr
    )


def test_a_forgers_key_is_never_offered_as_one_to_trust(
    signed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The statement re-signed by another key: the hint names that key only as one to use if
    you trust it as the host's, saying a forged statement names its forger's."""
    _, bundle, pem = signed
    forger = Ed25519PrivateKey.generate()
    spki = forger.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    keyid = hashlib.sha256(spki).hexdigest()
    lines = []
    for line in bundle.read_text().splitlines():
        envelope = json.loads(line)
        payload = base64.b64decode(envelope["payload"])
        signature = forger.sign(dsse.pae(envelope["payloadType"], payload))
        envelope["signatures"] = [{"keyid": keyid, "sig": base64.b64encode(signature).decode()}]
        lines.append(json.dumps(envelope) + "\n")
    forged = tmp_path / "forged.jsonl"
    forged.write_text("".join(lines))
    done = _verify(str(forged), "--key", str(pem))
    assert done.returncode == 1, done.stdout + done.stderr
    hint = next(line for line in done.stdout.splitlines() if line.startswith("FAIL signature"))
    assert hint.endswith(
        f"its signature names key {keyid}: verify with that key's public half, --key FILE "
        "(the signer's: another host's, or this host's before a rotation), only if you trust "
        "that key as the host's: anyone can sign a statement with a key of their own, and a "
        "forged statement names its forger's key"
    ), hint


def test_a_public_half_that_is_not_the_private_keys_is_said_by_verify_doctor_and_key(
    lock: Path, signed: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Another key's PEM as `signing-key.pub.pem`: verify without --key refuses it (status 2,
    both ids), the doctor warns, and `jigcmd key` (and a start) says what it wrote over."""
    source, bundle, pem = signed
    state = tmp_path / "state"
    shutil.copytree(source, state, symlinks=True)
    other = Ed25519PrivateKey.generate().public_key()
    spki = other.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    other_id, host_id = hashlib.sha256(spki).hexdigest(), _key_id(pem)
    other_pem = other.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (state / HOST_PUBLIC_NAME).write_bytes(other_pem)
    said = (
        f"{state / HOST_PUBLIC_NAME} holds key {other_id}, not the public half of "
        f"signing-key.pem beside it (key {host_id})"
    )
    refused = _verify(str(bundle), "--state-dir", str(state))
    assert (refused.returncode, refused.stdout) == (2, ""), refused.stdout
    assert f"jigcmd verify: the host key is not trusted: {said}; " in refused.stderr
    doctor = jigcmd_cli("doctor", "--state-dir", str(state))
    line = next(x for x in doctor.stdout.splitlines() if "signing key" in x)
    assert line.startswith("warn  signing key"), doctor.stdout
    assert line.endswith(f"Ed25519, key id {host_id}; but {said}"), line
    key = jigcmd_cli("key", "--state-dir", str(state))
    assert key.returncode == 0, key.stderr
    assert key.stderr.startswith(
        f"jigcmd key: warning: {said.replace(' holds ', ' held ')}: written again with its own\n"
    )
    assert (state / HOST_PUBLIC_NAME).read_bytes() == pem.read_bytes()
    assert _verify(str(bundle), "--state-dir", str(state)).returncode == 0
    # A start that writes it again says so too, on its stderr.
    (state / HOST_PUBLIC_NAME).write_bytes(other_pem)
    files = tmp_path / "candidate"
    (files / "src").mkdir(parents=True)
    (files / "src" / "cli.ts").write_text("console.log(1);\n")
    ran = run(lock, state, "cli", files)
    assert ran.returncode == 0, ran.stderr
    assert f"{said.replace(' holds ', ' held ')}: written again with its own" in ran.stderr
    assert (state / HOST_PUBLIC_NAME).read_bytes() == pem.read_bytes()


def _key_id(pem: Path) -> str:
    public = serialization.load_pem_public_key(pem.read_bytes())
    spki = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(spki).hexdigest()
