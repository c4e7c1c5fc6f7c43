"""`jigcmd verify` against what a hostile party hands it: a key it must not trust, inputs that
never end, bundles and answers that are not what jigcmd writes."""

from __future__ import annotations

import base64
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from jigcmd.attest.attester import Attester
from jigcmd.attest.inputs import McpResult, read_evidence
from jigcmd.attest.keys import HOST_PUBLIC_NAME, SigningKey
from tests.attest.test_statement import _evidence, _identity, _record
from tests.frontends.test_verify_shapes import STREAM, VIEW
from tests.required import require_root

# Before the bound, verify read /dev/zero until memory ran out: under this cap that is a
# MemoryError, not a machine driven into swap; the bounded read fits under it many times.
_ADDRESS_SPACE = 1 << 30


def _verify(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    def _capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (_ADDRESS_SPACE, _ADDRESS_SPACE))

    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "verify", *args],
        input=stdin, capture_output=True, timeout=120, check=False, preexec_fn=_capped,
    )  # fmt: skip
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def _signed(tmp_path: Path) -> tuple[Path, Path, SigningKey]:
    """A genuine bundle and its evidence, signed by a fresh key (an attacker's, say)."""
    key = SigningKey(Ed25519PrivateKey.generate(), "test")
    bundle = tmp_path / "bundle.jsonl"
    bundle.write_bytes(Attester(key, _identity()).attest(_record()))
    evidence = tmp_path / "evidence.json"
    evidence.write_bytes(msgspec.json.encode(_evidence()))
    return bundle, evidence, key


def _planted(tmp_path: Path, key: SigningKey) -> Path:
    """A state directory holding `key`'s public half as the host key."""
    state = tmp_path / "state"
    state.mkdir()
    (state / HOST_PUBLIC_NAME).write_bytes(key.public.pem)
    return state


@pytest.mark.parametrize("how", ["another user's", "world-writable"])
def test_verify_trusts_no_host_key_from_a_state_dir_the_other_verbs_refuse(
    tmp_path: Path, how: str
) -> None:
    """Another user's (or anyone's to write) directory supplies no key: status 2, --key named.

    Before, the planted public half verified the planter's own bundle: `verified`, status 0.
    """
    bundle, evidence, key = _signed(tmp_path)
    state = _planted(tmp_path, key)
    if how == "another user's":
        require_root("chown to another uid")
        os.chown(state / HOST_PUBLIC_NAME, 65534, 65534)
        os.chown(state, 65534, 65534)
        reason = f"owned by uid 65534, not by this user (uid {os.geteuid()})"
    else:
        os.chmod(state, 0o777)
        reason = "writable by group or others (mode 0777)"
    runs = subprocess.run(
        [sys.executable, "-m", "jigcmd", "runs", "--state-dir", str(state)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert runs.returncode == 2 and reason in runs.stderr, runs.stderr
    done = _verify(str(bundle), "--evidence", str(evidence), "--state-dir", str(state))
    assert (done.returncode, done.stdout) == (2, ""), done.stdout
    assert done.stderr == (
        f"jigcmd verify: the host key in {state} is not trusted: state directory {state} is "
        f"{reason}; pass --key PUB (the signer's public key, which `jigcmd key` prints on its "
        "host)\n"
    )


def test_verify_trusts_no_host_key_that_group_or_others_may_write(tmp_path: Path) -> None:
    """A 0666 public half in a readable 0755 directory could be anyone's key: refused."""
    bundle, _, key = _signed(tmp_path)
    state = _planted(tmp_path, key)
    os.chmod(state, 0o755)
    os.chmod(state / HOST_PUBLIC_NAME, 0o666)
    done = _verify(str(bundle), "--state-dir", str(state))
    assert (done.returncode, done.stdout) == (2, ""), done.stdout
    assert "writable by group or others (mode 0666), so not trusted" in done.stderr


def test_verify_uses_the_host_key_of_a_state_dir_of_ones_own(tmp_path: Path) -> None:
    """The check refuses only what the other verbs refuse: a 0700 directory of ours is used."""
    bundle, evidence, key = _signed(tmp_path)
    state = _planted(tmp_path, key)
    os.chmod(state, 0o700)
    done = _verify(str(bundle), "--evidence", str(evidence), "--state-dir", str(state))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.endswith("verified\n")


@pytest.mark.parametrize("which", ["FILE", "--evidence", "stdin"])
def test_an_input_that_never_ends_is_refused_with_status_2(tmp_path: Path, which: str) -> None:
    """`/dev/zero`: status 2 naming the bound, read no further; before, a MemoryError, status 1."""
    bundle, _, key = _signed(tmp_path)
    pub = tmp_path / "host.pub"
    pub.write_bytes(key.public.pem)
    endless = "/dev/zero"
    if which == "FILE":
        done = _verify(endless, "--key", str(pub))
    elif which == "--evidence":
        done = _verify(str(bundle), "--key", str(pub), "--evidence", endless)
    else:
        # A pipe: the child reads its stdin from /dev/zero.
        with open(endless, "rb") as zero:
            done = subprocess.run(
                [sys.executable, "-m", "jigcmd", "verify", "-", "--key", str(pub)],
                stdin=zero, capture_output=True, text=True, timeout=120, check=False,
                preexec_fn=lambda: resource.setrlimit(
                    resource.RLIMIT_AS, (_ADDRESS_SPACE, _ADDRESS_SPACE)
                ),
            )  # fmt: skip
        endless = "-"
    assert (done.returncode, done.stdout) == (2, ""), done.stderr[-500:]
    assert done.stderr == (
        f"jigcmd verify: {endless}: more than 64 MiB (or endless): larger than any bundle or "
        "answer jigcmd writes, so not one; give the bundle (`jigcmd attest`) or the answer as it "
        "came\n"
    )


def test_a_file_one_byte_past_the_bound_is_refused(tmp_path: Path) -> None:
    """A (sparse) file of 64 MiB and one byte: status 2, not parsed."""
    _, _, key = _signed(tmp_path)
    pub = tmp_path / "host.pub"
    pub.write_bytes(key.public.pem)
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as file:
        file.truncate(64 * 1024 * 1024 + 1)
    done = _verify(str(big), "--key", str(pub))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "more than 64 MiB" in done.stderr


def test_a_bundle_written_as_a_json_array_is_status_2_as_other_malformed_files(
    tmp_path: Path,
) -> None:
    """A JSON array of envelopes is no bundle: status 2 saying so; before, `FAIL bundle`, 1."""
    bundle, _, key = _signed(tmp_path)
    pub = tmp_path / "host.pub"
    pub.write_bytes(key.public.pem)
    array = tmp_path / "array.json"
    array.write_text(json.dumps([json.loads(line) for line in bundle.read_text().splitlines()]))
    done = _verify(str(array), "--key", str(pub))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"jigcmd verify: {array}: not a bundle: the file is a JSON array, not a DSSE envelope "
        "(an object) or JSON Lines of them\n"
    )


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("text", "not a bundle: not JSON Lines of DSSE envelopes: malformed JSON: "),
        ("empty", "not a bundle: the file is empty"),
        ("cut short", "not a bundle: not JSON Lines of DSSE envelopes: malformed JSON: "),
        ("an object", "not a bundle: not a DSSE envelope: Object missing required field"),
        ("an array", "not a bundle: the file is a JSON array, not a DSSE envelope"),
        ("a duplicate key", 'not strict JSON: duplicate key "payload"'),
        ("missing", "cannot be read: No such file or directory"),
    ],
)
def test_a_file_that_is_no_bundle_is_status_2_whatever_it_holds(
    tmp_path: Path, kind: str, said: str
) -> None:
    """Status 2 means nothing was checked, stdout empty: for every FILE that holds no bundle,
    as for evidence that is none. Status 1 is a bundle read whose check failed."""
    bundle, _, key = _signed(tmp_path)
    pub = tmp_path / "host.pub"
    pub.write_bytes(key.public.pem)
    text = bundle.read_bytes()
    first = text.splitlines()[0]
    content = {
        "text": b"a statement, honest\n",
        "empty": b"",
        "cut short": text[: len(text) // 2],
        "an object": b'{"a": 1}\n',
        "an array": b"[" + first + b"]\n",
        "a duplicate key": first[:-1] + b', "payload": "e30="}\n',
    }
    given = tmp_path / "given.jsonl"
    if kind in content:
        given.write_bytes(content[kind])
    done = _verify(str(given), "--key", str(pub))
    assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
    assert done.stderr.startswith(f"jigcmd verify: {given}: {said}"), done.stderr
    envelope = json.loads(first)
    sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    sig[0] ^= 0x01
    envelope["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    given.write_bytes(json.dumps(envelope).encode() + b"\n" + b"\n".join(text.splitlines()[1:]))
    failed = _verify(str(given), "--key", str(pub))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "FAIL signature: envelope 1: no signature verifies" in failed.stdout


def test_unknown_envelope_fields_are_said_to_be_unsigned(tmp_path: Path) -> None:
    """DSSE ignores them, so verify does too, but says so: a `skip envelope fields` line."""
    bundle, evidence, key = _signed(tmp_path)
    pub = tmp_path / "host.pub"
    pub.write_bytes(key.public.pem)
    lines = [json.loads(line) for line in bundle.read_text().splitlines()]
    lines[0]["note"] = "approved by security review"
    lines[1]["signatures"][0]["cert"] = "x"
    bundle.write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = _verify(str(bundle), "--key", str(pub), "--evidence", str(evidence))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "skip envelope fields: not DSSE envelope fields, so unsigned and no fact of the run: "
        "line 1 $.note, line 2 $.signatures[0].cert\n"
    ) in done.stdout


def test_a_run1_answer_line_jigcmd_never_writes_is_said_so(tmp_path: Path) -> None:
    """`jsonrpc` "1.0" and a field no Run/1 answer has: a `skip answer line` naming both."""
    bundle, _, key = _signed(tmp_path)
    pub = tmp_path / "host.pub"
    pub.write_bytes(key.public.pem)
    answer = tmp_path / "answer.json"
    value = msgspec.to_builtins(_evidence())
    line = {"jsonrpc": "1.0", "id": "c1", "result": {"value": value, "x": 1}, "note": "ok"}
    answer.write_text(json.dumps(line))
    done = _verify(str(bundle), "--key", str(pub), "--evidence", str(answer))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "skip answer line: jigcmd writes no Run/1 answer with these, so they are no fact of the "
        'run: $.jsonrpc "1.0", not "2.0"; $.note; $.result.x\n'
    ) in done.stdout
    line = {"jsonrpc": "2.0", "id": "c1", "result": {"value": value}}
    answer.write_text(json.dumps(line))
    done = _verify(str(bundle), "--key", str(pub), "--evidence", str(answer))
    assert done.returncode == 0 and "skip answer line" not in done.stdout, done.stdout


def test_an_mcp_answer_line_jigcmd_never_writes_joins_the_unknown_fields() -> None:
    """The line around an MCP `structuredContent`: its extra field and version are named."""
    content = {**VIEW, "stderr": STREAM}
    line = {"jsonrpc": "1.0", "id": 3, "result": {"structuredContent": content}, "note": "ok"}
    read = read_evidence(json.dumps(line).encode())
    assert isinstance(read, McpResult)
    assert read.unknown == ('$.jsonrpc "1.0", not "2.0"', "$.note")
