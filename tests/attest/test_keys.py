"""The signing key: the host key made on first use, the operator's file, $JIGCMD_SIGNING_KEY."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from jigcmd.attest.hostpublic import load_host_public
from jigcmd.attest.keys import (
    HOST_KEY_NAME,
    HOST_PUBLIC_NAME,
    KEY_ENV,
    SigningKeyError,
    key_id,
    load_public,
    open_signing_key,
)
from tests.required import require_root

REPO = Path(__file__).resolve().parents[2]


def _pem(
    key: Ed25519PrivateKey | ec.EllipticCurvePrivateKey, password: bytes | None = None
) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.NoEncryption()
        if password is None
        else serialization.BestAvailableEncryption(password)
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def _key_file(path: Path, data: bytes, mode: int = 0o600) -> Path:
    path.write_bytes(data)
    path.chmod(mode)
    return path


def test_the_host_key_is_made_on_first_use_0600_with_its_public_half_beside_it(
    tmp_path: Path,
) -> None:
    """First open makes signing-key.pem (0600) and signing-key.pub.pem; the next one reuses it."""
    key = open_signing_key(tmp_path, environ={})
    private = tmp_path / HOST_KEY_NAME
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert load_public(tmp_path / HOST_PUBLIC_NAME).keyid == key.public.keyid
    again = open_signing_key(tmp_path, environ={})
    assert again.public.keyid == key.public.keyid
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_the_key_id_is_the_sha256_of_the_public_key_der(tmp_path: Path) -> None:
    """The id anyone can recompute from the PEM: SHA-256 over SubjectPublicKeyInfo DER."""
    key = open_signing_key(tmp_path, environ={})
    der = serialization.load_pem_public_key(key.public.pem).public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert key.public.keyid == hashlib.sha256(der).hexdigest()


def test_servers_starting_together_end_with_one_host_key(tmp_path: Path) -> None:
    """Eight threads opening a fresh state directory at once all get the same key."""
    ids: list[str] = []
    barrier = threading.Barrier(8)

    def open_one() -> None:
        barrier.wait()
        ids.append(open_signing_key(tmp_path, environ={}).public.keyid)

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == 1 and len(ids) == 8


def test_a_lost_public_half_is_written_again(tmp_path: Path) -> None:
    """The public half is derived: deleted or wrong, it is rewritten from the private key."""
    key = open_signing_key(tmp_path, environ={})
    (tmp_path / HOST_PUBLIC_NAME).write_bytes(b"junk")
    open_signing_key(tmp_path, environ={})
    assert (tmp_path / HOST_PUBLIC_NAME).read_bytes() == key.public.pem


def test_a_public_half_another_user_owns_is_not_trusted_and_written_again(tmp_path: Path) -> None:
    """Its owner could swap in a key of their own for `verify`: refused, and a start replaces it."""
    require_root("needs root: the public half is chowned to another uid")
    key = open_signing_key(tmp_path, environ={})
    public = tmp_path / HOST_PUBLIC_NAME
    os.chown(public, 61_999, 61_999)
    with pytest.raises(SigningKeyError, match="owned by uid 61999, not by this user"):
        load_host_public(tmp_path)
    open_signing_key(tmp_path, environ={})
    assert public.stat().st_uid == os.geteuid()
    assert load_host_public(tmp_path).key.keyid == key.public.keyid


def test_the_operators_key_file_wins_over_the_environment_and_the_host_key(tmp_path: Path) -> None:
    """--signing-key FILE first, then $JIGCMD_SIGNING_KEY, else the host key."""
    given = Ed25519PrivateKey.generate()
    other = Ed25519PrivateKey.generate()
    explicit = _key_file(tmp_path / "given.pem", _pem(given))
    named = _key_file(tmp_path / "named.pem", _pem(other))
    state = tmp_path / "state"
    state.mkdir()
    environ = {KEY_ENV: str(named)}
    assert open_signing_key(state, explicit, environ).public.keyid == key_id(given.public_key())
    assert open_signing_key(state, None, environ).public.keyid == key_id(other.public_key())
    assert not (state / HOST_KEY_NAME).exists()


def test_a_key_handed_over_on_a_descriptor_is_read_through_dev_fd(tmp_path: Path) -> None:
    """A key held elsewhere arrives on a pipe: `jigcmd key --signing-key /dev/fd/N` reads it."""
    given = Ed25519PrivateKey.generate()
    (tmp_path / "state").mkdir()
    read, write = os.pipe()
    os.write(write, _pem(given))
    os.close(write)
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "jigcmd",
                "key",
                "--state-dir",
                str(tmp_path / "state"),
                "--signing-key",
                f"/dev/fd/{read}",
            ],
            pass_fds=(read,),
            capture_output=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    finally:
        os.close(read)
    assert done.returncode == 0, done.stderr
    public = given.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    assert done.stdout == public
    assert b"key id: " in done.stderr
    assert not (tmp_path / "state" / HOST_KEY_NAME).exists()


@pytest.mark.parametrize(
    ("content", "mode", "words"),
    [
        (None, 0o600, "no such file"),
        (b"not a key", 0o600, "not a PEM private key"),
        ("ec", 0o600, "not an Ed25519 key"),
        ("encrypted", 0o600, "is encrypted"),
        ("good", 0o644, "readable or writable by group or others"),
        (b"x" * 20_000, 0o600, "larger than"),
    ],
)
def test_a_key_that_cannot_be_used_is_refused_naming_the_file_and_the_cause(
    tmp_path: Path, content: bytes | str | None, mode: int, words: str
) -> None:
    """Missing, not PEM, not Ed25519, encrypted, too open, too large: each says so."""
    path = tmp_path / "key.pem"
    data: bytes | None
    if content == "ec":
        data = _pem(ec.generate_private_key(ec.SECP256R1()))
    elif content == "encrypted":
        data = _pem(Ed25519PrivateKey.generate(), b"secret")
    elif content == "good":
        data = _pem(Ed25519PrivateKey.generate())
    else:
        data = content if isinstance(content, bytes) else None
    if data is not None:
        _key_file(path, data, mode)
    with pytest.raises(SigningKeyError, match=words) as raised:
        open_signing_key(tmp_path, path, {})
    assert str(path) in str(raised.value)


def _documented_serve_refusals() -> tuple[int, str, int, str]:
    """What docs/attestation.md says `serve` answers when its key cannot be used.

    The Run/1 error code and `data.code`, the MCP error code and its message up to the `…`.
    """
    text = " ".join((REPO / "docs" / "attestation.md").read_text(encoding="utf-8").split())
    found = re.search(
        r'a Run/1 call `(-\d+)` with `data\.code` `(\w+)`, an MCP request `(-\d+)` "([^"]*)…"',
        text,
    )
    assert found, "docs/attestation.md no longer says what serve answers"
    return int(found[1]), found[2], int(found[3]), found[4]


def _serve_answers(
    binding: Path, key: Path, state: Path, requests: list[str]
) -> list[dict[str, Any]]:
    """`jigcmd serve` given `requests` on stdin: it exits 2 and answers each it read."""
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "serve", "--binding", str(binding),
         "--state-dir", str(state), "--signing-key", str(key)],
        input="".join(f"{line}\n" for line in requests), capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"jigcmd serve: signing key {key}: " in done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_serve_answers_the_requests_sent_with_a_key_it_cannot_use_as_the_docs_say(
    tmp_path: Path,
) -> None:
    """A 0644 key: each request already sent gets the documented error naming key and cause."""
    flow_code, flow_kind, mcp_code, mcp_prefix = _documented_serve_refusals()
    example = tmp_path / "example"
    shutil.copytree(REPO / "jigcmd" / "example", example)
    key = _key_file(tmp_path / "my.pem", _pem(Ed25519PrivateKey.generate()), 0o644)
    # The path itself may be scrubbed on the wire (a host path under HOME or the cwd).
    cause = "readable or writable by group or others (mode 0644); run chmod 600 "
    mcp = (example / "requests" / "mcp.jsonl").read_text().splitlines()[:3]
    answers = _serve_answers(example / "binding.toml", key, tmp_path / "state", mcp)
    assert [answer["id"] for answer in answers] == [1, 2]
    for answer in answers:
        assert answer["error"]["code"] == mcp_code
        message = answer["error"]["message"]
        assert message.startswith(f"{mcp_prefix}signing key ") and cause in message, answer
    flow = (example / "requests" / "flow.jsonl").read_text().splitlines()
    (answer,) = _serve_answers(example / "binding.toml", key, tmp_path / "state", flow)
    assert answer["error"]["code"] == flow_code
    assert answer["error"]["data"]["code"] == flow_kind
    message = answer["error"]["message"]
    assert message.startswith("jigcmd cannot serve: signing key ") and cause in message, answer


def test_an_unreadable_host_key_fails_rather_than_being_replaced(tmp_path: Path) -> None:
    """A damaged host key is an error to fix, never silently swapped for a new identity."""
    _key_file(tmp_path / HOST_KEY_NAME, b"damaged")
    with pytest.raises(SigningKeyError, match="not a PEM private key"):
        open_signing_key(tmp_path, environ={})
    assert (tmp_path / HOST_KEY_NAME).read_bytes() == b"damaged"


def test_the_host_key_and_its_public_half_are_the_librarys_pem_bytes(tmp_path: Path) -> None:
    """The files written without the library's serializers are byte for byte what it writes."""
    for number in range(8):
        state = tmp_path / str(number)
        state.mkdir()
        key = open_signing_key(state, environ={})
        written = (state / HOST_KEY_NAME).read_bytes()
        loaded = serialization.load_pem_private_key(written, password=None)
        assert isinstance(loaded, Ed25519PrivateKey)
        assert written == _pem(loaded)
        assert (state / HOST_PUBLIC_NAME).read_bytes() == key.public.pem
        assert key.public.pem == loaded.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        assert key.sign(b"statement") == loaded.sign(b"statement")


@pytest.mark.parametrize("form", ["library", "crlf", "text before", "openssl genpkey"])
def test_a_key_in_any_pem_form_the_library_reads_gives_the_same_key(
    tmp_path: Path, form: str
) -> None:
    """The one-line form is read here; every other PEM text is the library's to read."""
    if form == "openssl genpkey":
        path = tmp_path / "key.pem"
        subprocess.run(
            ["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(path)],
            check=True,
            capture_output=True,
            timeout=60,
        )
        path.chmod(0o600)
        data = path.read_bytes()
    else:
        data = _pem(Ed25519PrivateKey.generate())
        if form == "crlf":
            data = data.replace(b"\n", b"\r\n")
        elif form == "text before":
            data = b"an operator's note\n" + data
        path = _key_file(tmp_path / "key.pem", data)
    loaded = serialization.load_pem_private_key(data, password=None)
    assert isinstance(loaded, Ed25519PrivateKey)
    key = open_signing_key(tmp_path, path, {})
    assert key.sign(b"statement") == loaded.sign(b"statement")
    assert key.public.keyid == key_id(loaded.public_key())


def test_opening_the_key_imports_none_of_the_librarys_serializers(tmp_path: Path) -> None:
    """Making and reading the host key leaves `serialization` (SSH, RSA, DSA, …) unimported."""
    program = (
        "import sys; from pathlib import Path; from jigcmd.attest.keys import open_signing_key\n"
        "for _ in range(2): open_signing_key(Path(sys.argv[1]), environ={}).public.pem\n"
        "print(sorted(m for m in sys.modules if '.serialization' in m))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path)],
        capture_output=True,
        check=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.stdout == b"[]\n"


@pytest.mark.parametrize("second", ["private", "public"])
def test_a_signing_key_file_holding_several_pem_blocks_is_refused_at_start(
    tmp_path: Path, second: str
) -> None:
    """Two keys (or a key and a public half) in one file: the library would sign with the
    first alone, so `jigcmd key`, `jigcmd run` and the host key refuse it, naming the file."""
    first = Ed25519PrivateKey.generate()
    other = Ed25519PrivateKey.generate()
    extra = (
        _pem(other)
        if second == "private"
        else other.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    two = _key_file(tmp_path / "two.pem", _pem(first) + extra)
    said = (
        f"signing key {two}: holds 2 PEM blocks, and one key signs: give a file with that one "
        "key alone\n"
    )

    def jigcmd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "jigcmd", *args],
            capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    printed = jigcmd("key", "--signing-key", str(two))
    assert (printed.returncode, printed.stdout) == (2, ""), printed.stderr
    assert printed.stderr == f"jigcmd key: {said}"
    example = tmp_path / "example"
    shutil.copytree(REPO / "jigcmd" / "example", example, ignore=shutil.ignore_patterns("*.lock"))
    ran = jigcmd(
        "run", "--binding", str(example / "binding.toml"), "--state-dir", str(tmp_path / "s"),
        "--signing-key", str(two), "cli", "--files", str(example / "candidates" / "passing"),
    )  # fmt: skip
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert said.rstrip("\n") in ran.stderr
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    _key_file(state / HOST_KEY_NAME, _pem(first) + extra)
    host = jigcmd("key", "--state-dir", str(state))
    assert host.returncode == 2, host.stderr
    assert f"signing key {state / HOST_KEY_NAME}: holds 2 PEM blocks" in host.stderr
