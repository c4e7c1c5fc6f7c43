"""`jigcmd key` as a person types it: a mistyped `--state-dir` makes no key.

It once made the directory and a brand-new key, printed it and exited 0, so a rotation
recipe with a mistyped `$state` archived a fresh key as the retired one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from jigcmd.attest.keys import HOST_KEY_NAME


def _key(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", "key", *args],
        capture_output=True, text=True, timeout=120, check=False, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_state_dir_that_does_not_exist_is_status_2_and_nothing_is_made(
    tmp_path: Path,
) -> None:
    """Status 2 naming the path, "it does not exist" and how to make one; no key printed."""
    typo = tmp_path / "stat"
    done = _key("--state-dir", str(typo))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"jigcmd key: --state-dir {typo}: it does not exist")
    assert f"mkdir -p -m 700 {typo}" in done.stderr
    assert not typo.exists()


def test_an_existing_state_dir_gets_its_host_key_on_first_use(tmp_path: Path) -> None:
    """A directory that exists (made by the operator or serve) still gets its key made."""
    state = tmp_path / "state"
    state.mkdir()
    done = _key("--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("-----BEGIN PUBLIC KEY-----")
    assert (state / HOST_KEY_NAME).is_file()


def test_the_default_state_dir_is_still_made_on_first_use(tmp_path: Path) -> None:
    """No --state-dir: the default directory (here `$JIGCMD_STATE_DIR`) is made, and its key."""
    default = tmp_path / "default"
    done = _key(env={**os.environ, "JIGCMD_STATE_DIR": str(default)})
    assert done.returncode == 0, done.stderr
    assert (default / HOST_KEY_NAME).is_file()


def test_a_named_key_is_printed_and_no_state_dir_is_read_or_made(tmp_path: Path) -> None:
    """`--signing-key F` (or `$JIGCMD_SIGNING_KEY`) is what serve signs with: no state dir."""
    made = tmp_path / "made"
    made.mkdir()
    assert _key("--state-dir", str(made)).returncode == 0
    named = made / HOST_KEY_NAME
    typo, default = tmp_path / "stat", tmp_path / "default"
    by_option = _key("--signing-key", str(named), "--state-dir", str(typo))
    by_env = _key(
        env={**os.environ, "JIGCMD_SIGNING_KEY": str(named), "JIGCMD_STATE_DIR": str(default)}
    )
    for done in (by_option, by_env):
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("-----BEGIN PUBLIC KEY-----")
        assert done.stderr.endswith(f"({named})\n")
    assert by_option.stdout == by_env.stdout
    assert not typo.exists() and not default.exists()


def _recipe(marker: str) -> str:
    """The fenced block after `<!-- marker: … -->` in docs/attestation.md, as written."""
    docs = (Path(__file__).parents[2] / "docs" / "attestation.md").read_text()
    after = docs.split(f"<!-- {marker}:", 1)[1].split("```", 2)[1]
    return after.split("\n", 1)[1]


def test_an_openssh_private_key_is_named_and_the_documented_conversion_works(
    tmp_path: Path,
) -> None:
    """`-----BEGIN OPENSSH PRIVATE KEY-----`: said what it is and how to convert it (not the
    library's "no BEGIN/END delimiters"); the docs' command makes the same key PKCS#8."""
    private = Ed25519PrivateKey.generate()
    ssh = tmp_path / "id_ed25519"
    ssh.write_bytes(private.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption()))
    ssh.chmod(0o600)
    done = _key("--signing-key", str(ssh))
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == (
        f"jigcmd key: signing key {ssh}: an OpenSSH private key (-----BEGIN OPENSSH PRIVATE "
        "KEY-----), not PKCS#8 PEM (-----BEGIN PRIVATE KEY-----), and ssh-keygen cannot write "
        "an Ed25519 key as PKCS#8: convert a copy with the cryptography library "
        '(docs/attestation.md, "The key"), or make a key with `openssl genpkey -algorithm '
        "ed25519 -out FILE`\n"
    )
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    subprocess.run(
        ["bash", "-ec", _recipe("openssh-recipe")], cwd=tmp_path, check=True, timeout=60,
        env={**os.environ, "PATH": path},
    )  # fmt: skip
    converted = _key("--signing-key", str(tmp_path / "signing-key.pem"))
    assert converted.returncode == 0, converted.stderr
    assert converted.stdout.encode() == private.public_key().public_bytes(
        Encoding.PEM, PublicFormat.SubjectPublicKeyInfo
    )


def test_a_public_key_given_as_the_signing_key_is_named_before_its_mode(tmp_path: Path) -> None:
    """A public key, 0644 as public keys are: "a public key", never "run chmod 600" on it."""
    public = Ed25519PrivateKey.generate().public_key()
    for name, data in (
        ("key.pub.pem", public.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)),
        ("id_ed25519.pub", public.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)),
    ):
        given = tmp_path / name
        given.write_bytes(data)
        given.chmod(0o644)
        done = _key("--signing-key", str(given))
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr == (
            f"jigcmd key: signing key {given}: a public key: a signing key is the private key "
            "(PKCS#8 PEM, -----BEGIN PRIVATE KEY-----, mode 0600); its public half is what "
            "verifiers get\n"
        )
