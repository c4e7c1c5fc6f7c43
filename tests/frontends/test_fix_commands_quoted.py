"""Every path in a printed fix command stays one shell word, whatever it holds.

A root operator pastes these commands: `chmod go-w /tmp/a b;id>&2` pasted would run `id`.
Each refusal is met through the real CLI (doctor, runs, key), as an operator meets it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.durable.statedir import prepare_state_dir
from jigcmd.journal.marker import MARKER_NAME
from jigcmd.journal.store import DB_NAME, Journal
from tests.killedserver import kill_a_server_mid_run
from tests.required import require_root

# Space, `;`, a redirection, a quote and a `$`: each would split or run something unquoted.
_HOSTILE = "a b;touch pwned>&2'$x"
_OTHER = 61_999  # a uid no test process runs as (only chowned to)


def _jigcmd(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True, text=True, timeout=120, check=False, cwd=cwd,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _pasted(text: str, command: str) -> str:
    """The word after `command` in `text`, as a shell splits it (a `,`, `:` or `` ` `` is prose)."""
    assert command in text, text
    lexer = shlex.shlex(text[text.index(command) :], posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    # Only as far as the path: the prose after it may hold a lone apostrophe.
    words = [lexer.get_token() for _ in range(len(command.split()) + 1)]
    return str(words[-1]).rstrip(",:`")


def _state_hint(state: Path, status: str = "FAIL") -> str:
    """The state check's fix, from `jigcmd doctor --json`."""
    done = _jigcmd("doctor", "--json", "--state-dir", str(state))
    (check,) = [c for c in json.loads(done.stdout) if c["check"] == "state"]
    assert check["status"] == status, check
    return str(check["hint"])


def _open_parent(tmp_path: Path) -> Path:
    """A directory others may write, not sticky: serve refuses any state directory in it."""
    parent = tmp_path / _HOSTILE
    parent.mkdir()
    parent.chmod(0o777)
    return parent


def _journal(tmp_path: Path) -> Path:
    state = prepare_state_dir(tmp_path / _HOSTILE / "state")
    with Journal.open(state):
        pass
    return state


def test_doctor_prints_chmod_of_a_writable_parent_as_one_word(tmp_path: Path) -> None:
    """statepath: the parent's `chmod go-w`."""
    parent = _open_parent(tmp_path)
    assert _pasted(_state_hint(parent / "state"), "chmod go-w") == str(parent)


def test_doctor_prints_chmod_of_a_state_directory_others_may_write_as_one_word(
    tmp_path: Path,
) -> None:
    """statefiles: the state directory's own `chmod 700`."""
    state = tmp_path / _HOSTILE
    state.mkdir()
    state.chmod(0o777)
    assert _pasted(_state_hint(state), "chmod 700") == str(state)


def test_doctor_prints_chown_of_a_state_directory_another_user_owns_as_one_word(
    tmp_path: Path,
) -> None:
    """statefiles: root is offered `chown -R 0` of a volume another uid owns."""
    require_root("needs root: the state directory is chowned to another uid")
    state = tmp_path / _HOSTILE
    state.mkdir(mode=0o700)
    os.chown(state, _OTHER, _OTHER)
    assert _pasted(_state_hint(state), "chown -R 0") == str(state)


def test_runs_prints_chmod_of_a_journal_file_others_may_write_as_one_word(
    tmp_path: Path,
) -> None:
    """statedir: the journal file's `chmod go-w`."""
    state = _journal(tmp_path)
    (state / DB_NAME).chmod(0o666)
    done = _jigcmd("runs", "--state-dir", str(state))
    assert done.returncode == 2, done.stderr
    assert _pasted(done.stderr, "chmod go-w") == str(state / DB_NAME)


def test_runs_prints_the_marker_to_remove_as_one_word(tmp_path: Path) -> None:
    """marker: a FIFO where the marker belongs, `remove` it."""
    state = _journal(tmp_path)
    (state / MARKER_NAME).unlink()
    os.mkfifo(state / MARKER_NAME, 0o600)
    done = _jigcmd("runs", "--state-dir", str(state))
    assert done.returncode == 2, done.stderr
    assert _pasted(done.stderr, "remove") == str(state / MARKER_NAME)


def test_doctor_prints_the_recover_command_with_the_state_dir_as_one_word(
    tmp_path: Path,
) -> None:
    """statecheck: `jigcmd recover --state-dir` for a run whose server is gone."""
    state = tmp_path / _HOSTILE
    kill_a_server_mid_run(state)
    hint = _state_hint(state, "warn")
    assert _pasted(hint, "jigcmd recover --state-dir") == str(state)


def test_key_prints_chmod_of_a_signing_key_others_may_read_as_one_word(tmp_path: Path) -> None:
    """keys: `chmod 600` of a --signing-key file, not "chmod 600 it"."""
    directory = tmp_path / _HOSTILE
    directory.mkdir()
    key = directory / "key.pem"
    key.write_bytes(bytes(32))  # a raw seed: any 32 bytes are a key
    key.chmod(0o644)
    done = _jigcmd("key", "--signing-key", str(key))
    assert done.returncode == 2, done.stderr
    assert _pasted(done.stderr, "run chmod 600") == str(key)


def test_key_suggests_the_mkdir_p_that_makes_a_missing_state_dir_and_it_works(
    tmp_path: Path,
) -> None:
    """Its parents missing too: `mkdir -p`, which pasted into a shell makes it, nothing else."""
    state = tmp_path / _HOSTILE / "nx1" / "state"
    done = _jigcmd("key", "--state-dir", str(state))
    assert done.returncode == 2 and not (tmp_path / _HOSTILE).exists(), done.stderr
    assert _pasted(done.stderr, "mkdir -p -m 700") == str(state)
    start = done.stderr.index("mkdir -p -m 700")
    pasted = done.stderr[start : done.stderr.index(", or start `jigcmd serve`")]
    subprocess.run(["sh", "-c", pasted], cwd=tmp_path, check=True)
    assert state.is_dir() and not (tmp_path / "pwned").exists()
    assert _jigcmd("key", "--state-dir", str(state)).returncode == 0


@pytest.mark.parametrize("where", ["open parent", "file on the way"])
def test_key_gives_serves_refusal_for_a_state_dir_serve_would_not_make(
    tmp_path: Path, where: str
) -> None:
    """Not "create it first": serve's own reason (and fix), as the doctor gives it."""
    if where == "open parent":
        parent = _open_parent(tmp_path)
        state, reason = parent / "state", "is writable by group or others"
    else:
        (tmp_path / "file").write_text("")
        state, reason = tmp_path / "file" / "state", f"{tmp_path / 'file'}, on the state "
    done = _jigcmd("key", "--state-dir", str(state))
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert "it does not exist" in done.stderr and "serve would refuse to make it" in done.stderr
    assert reason in done.stderr and "mkdir" not in done.stderr, done.stderr
    if where == "open parent":
        assert _pasted(done.stderr, "chmod go-w") == str(parent)
    assert not state.exists()
