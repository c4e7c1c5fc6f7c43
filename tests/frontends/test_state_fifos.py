"""A FIFO where the state directory keeps a file: every verb refuses it naming it, none hangs.

Each verb runs as a real child; the timeout only bounds a hang (before, each of these waited
forever for a writer that never came).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.attest.keys import HOST_KEY_NAME, HOST_PUBLIC_NAME
from jigcmd.durable.statedir import prepare_state_dir
from jigcmd.journal.marker import MARKER_NAME
from jigcmd.journal.store import DB_NAME, Journal

REPO = Path(__file__).resolve().parents[2]
_HANG_S = 60

_FIFO = "a FIFO (named pipe), not a regular file"
_JOURNAL_VERBS = (
    ("runs",),
    ("attest", "--run-id", "run-1", "op-1"),
    ("prune", "--older-than", "0s", "--dry-run"),
    ("prune", "--older-than", "0s"),
)


def _jigcmd(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        input=stdin, capture_output=True, text=True, timeout=_HANG_S, check=False,
    )  # fmt: skip


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """A state directory with a journal and a host key, as serve leaves one."""
    state = prepare_state_dir(tmp_path / "state")
    with Journal.open(state):
        pass
    assert _jigcmd("key", "--state-dir", str(state)).returncode == 0
    return state


def _fifo(path: Path) -> None:
    path.unlink(missing_ok=True)
    os.mkfifo(path, 0o600)


@pytest.mark.parametrize("verb", _JOURNAL_VERBS, ids=" ".join)
@pytest.mark.parametrize("name", [MARKER_NAME, DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"])
def test_a_fifo_among_the_journal_files_is_refused_by_every_verb_that_opens_it(
    state: Path, name: str, verb: tuple[str, ...]
) -> None:
    """Status 2 naming the file and what it is, and the FIFO left as it was."""
    _fifo(state / name)
    done = _jigcmd(*verb, "--state-dir", str(state))
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.startswith(f"jigcmd {verb[0]}: journal {state / DB_NAME}: ")
    what = f"is {_FIFO}" if name == DB_NAME else f"{name} is {_FIFO}"
    assert what in done.stderr and "; fix: " in done.stderr, done.stderr
    assert (state / name).is_fifo()


@pytest.mark.parametrize("name", [HOST_KEY_NAME, HOST_PUBLIC_NAME])
def test_key_refuses_a_fifo_at_the_host_key_and_replaces_nothing(state: Path, name: str) -> None:
    _fifo(state / name)
    done = _jigcmd("key", "--state-dir", str(state))
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    kind = "signing key" if name == HOST_KEY_NAME else "public key"
    assert done.stderr.startswith(f"jigcmd key: {kind} {state / name}: is {_FIFO}; fix: ")
    assert (state / name).is_fifo()


def test_verify_refuses_a_fifo_at_the_host_public_key(state: Path, tmp_path: Path) -> None:
    # An envelope in shape, never checked: the key is refused first.
    (tmp_path / "b.jsonl").write_text(
        '{"payload": "e30=", "payloadType": "application/vnd.in-toto+json", "signatures": []}\n'
    )
    _fifo(state / HOST_PUBLIC_NAME)
    done = _jigcmd("verify", str(tmp_path / "b.jsonl"), "--state-dir", str(state))
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == f"jigcmd verify: public key {state / HOST_PUBLIC_NAME}: is {_FIFO}\n"


@pytest.mark.parametrize("name", [HOST_KEY_NAME, HOST_PUBLIC_NAME, MARKER_NAME])
def test_serve_answers_the_requests_sent_and_exits_2_with_a_fifo_in_its_state_dir(
    state: Path, tmp_path: Path, name: str
) -> None:
    """As docs/attestation.md promises for a key it cannot use: each request gets the reason."""
    example = tmp_path / "example"
    shutil.copytree(REPO / "jigcmd" / "example", example)
    _fifo(state / name)
    requests = (example / "requests" / "flow.jsonl").read_text()
    done = _jigcmd(
        "serve", "--binding", str(example / "binding.toml"), "--state-dir", str(state),
        stdin=requests,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert _FIFO in done.stderr
    (answer,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert answer["error"]["data"]["code"] == "UNAVAILABLE"
    assert answer["error"]["message"].startswith("jigcmd cannot serve: ")
    assert _FIFO in answer["error"]["message"]
