"""A journal that cannot be used at start: one line naming file, cause and fix; exit 2; answered.

Each case breaks the state directory the way it breaks in the field (a full disk, a read-only
mount, a damaged or replaced database, a lost WAL), then starts the real `jigcmd serve` (with
an `initialize` already in its input) and `jigcmd recover` on it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import jigcmd
from jigcmd.durable.statedir import prepare_state_dir
from jigcmd.frontends.diagnosis.statecheck import journal_check
from jigcmd.journal.failures import CALLS_REFUSED, LEAST_FREE_BYTES
from jigcmd.journal.rows import NewRow
from jigcmd.journal.store import Journal
from tests.faults.disk import SmallDisk

_BINDING = Path(jigcmd.__file__).parent / "example" / "binding.toml"
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init-1",
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}},
}


def _journal_with_a_row(state: Path) -> None:
    with Journal.open(prepare_state_dir(state)) as journal:
        journal.begin(
            NewRow(
                root_run="run-a",
                operation_id="op-1",
                signature="s",
                context="c",
                deadline_unix_ms=0,
                run_id="r",
            )
        )


def _jigcmd(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )


def _refused(state: Path, verb: str, *words: str) -> str:
    """`verb` on `state` exits 2 with one `jigcmd <verb>: journal …; fix: …` line, no traceback."""
    args = ["serve", "--binding", str(_BINDING)] if verb == "serve" else ["recover"]
    frame = (json.dumps(_INITIALIZE) + "\n").encode()
    done = _jigcmd(*args, "--state-dir", str(state), stdin=frame if verb == "serve" else b"")
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert "Traceback" not in stderr, stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith(f"jigcmd {verb}:")]
    assert f"journal {state / 'journal.sqlite3'}: " in line, line
    assert "; fix: " in line, line
    for word in words:
        assert word in line, line
    if verb == "serve":
        (answer,) = [json.loads(out) for out in done.stdout.splitlines()]
        assert answer["id"] == "init-1"
        assert answer["error"]["code"] == -32603
        assert "jigcmd cannot serve: journal" in answer["error"]["message"]
    return line


def _not_a_database(state: Path) -> None:
    _journal_with_a_row(state)
    with open(state / "journal.sqlite3", "r+b") as handle:
        handle.write(b"this is not sqlite at all")


def _malformed(state: Path) -> None:
    _journal_with_a_row(state)
    with open(state / "journal.sqlite3", "r+b") as handle:
        handle.seek(4096)
        handle.write(os.urandom(3 * 4096))


def _a_directory_in_its_place(state: Path) -> None:
    state.mkdir(mode=0o700)
    (state / "journal.sqlite3").mkdir()


def _a_missing_table(state: Path) -> None:
    _journal_with_a_row(state)
    with Journal.open(state) as journal, journal._db.write() as conn:
        conn.execute("DROP TABLE audit")


def _a_lost_wal(state: Path) -> None:
    _journal_with_a_row(state)
    # As after a SIGKILL: the marker says a writer was active, and the WAL is gone.
    (state / "journal.mark").write_text('{"journal": "journal.sqlite3", "clean": false}\n')


@pytest.mark.parametrize("verb", ["serve", "recover"])
@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (_not_a_database, ("not a database", "damaged")),
        (_malformed, ("malformed", "damaged")),
        (_a_directory_in_its_place, ("a directory is where the journal file should be",)),
        (_a_missing_table, ("'audit' is missing", "damaged")),
        (_a_lost_wal, ("journal.sqlite3-wal is missing", "move")),
    ],
)
def test_a_damaged_journal_refuses_to_start_in_one_line(
    tmp_path: Path, verb: str, damage: Callable[[Path], None], words: tuple[str, ...]
) -> None:
    """Damaged, replaced or incomplete: exit 2, one line with the file, the cause and the fix."""
    state = tmp_path / "state"
    damage(state)
    _refused(state, verb, *words)


@pytest.mark.parametrize("verb", ["serve", "recover"])
def test_a_full_disk_at_start_refuses_in_one_line_naming_the_disk(
    small_disk: SmallDisk, verb: str
) -> None:
    """A new journal on a full disk: 'full', and free space as the fix, not 'cannot rollback'."""
    small_disk.fill()
    _refused(small_disk.path, verb, "full", "free space")


@pytest.mark.parametrize("verb", ["serve", "recover"])
def test_a_journal_with_runs_on_a_full_disk_is_named_full_never_damaged(
    small_disk: SmallDisk, verb: str
) -> None:
    """A full disk fails SQLite's open with "disk I/O error": named full, nothing lost, kept."""
    _journal_with_a_row(small_disk.path)
    small_disk.fill()
    line = _refused(small_disk.path, verb, "is full", "free space", "nothing recorded was lost")
    assert "damaged" not in line and "aside" not in line, line


@pytest.mark.parametrize("verb", ["serve", "recover"])
def test_a_read_only_populated_state_directory_refuses_in_one_line(
    small_disk: SmallDisk, verb: str
) -> None:
    """A journal on a read-only mount: 'read-only' named, and how to fix it."""
    _journal_with_a_row(small_disk.path)
    small_disk.read_only()
    _refused(small_disk.path, verb, "mounted read-only", "remount it read-write")


def test_doctor_and_serve_agree_on_how_little_free_space_is_too_little(
    small_disk: SmallDisk,
) -> None:
    """812 KiB free: doctor's state line is ok and serve starts (it did, while doctor said
    full). Below `LEAST_FREE_BYTES` serve still starts (replays need no write; it refused,
    and a lost child re-spawned could not be answered): doctor warns, in the words each new
    call is refused with (tests/lifetime/test_serve_on_a_full_disk.py), and does not fail."""
    _journal_with_a_row(small_disk.path)
    frame = (json.dumps(_INITIALIZE) + "\n").encode()
    for free in (812 * 1024, LEAST_FREE_BYTES // 2):
        small_disk.leave(free)
        if free > LEAST_FREE_BYTES:
            assert journal_check(small_disk.path).status == "ok"
        served = _jigcmd(
            "serve", "--binding", str(_BINDING), "--state-dir", str(small_disk.path), stdin=frame
        )
        assert served.returncode == 0, served.stderr.decode()
        (answer,) = [json.loads(out) for out in served.stdout.splitlines()]
        assert "result" in answer, answer
    check = journal_check(small_disk.path)
    assert check.status == "warn" and check.hint is not None, check
    assert f"the filesystem holding {small_disk.path} is full" in check.detail
    assert CALLS_REFUSED in check.detail and "free space on it" in check.hint
