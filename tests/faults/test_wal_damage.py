"""A damaged or removed write-ahead log: refused, never re-run, and a refusal changes no file.

Each case drives the real `jigcmd serve` child on the bundled example: one operation
completes, the server is SIGKILLed (its history is then only in `journal.sqlite3-wal`) or
left idle, the WAL is cut, corrupted or removed, and the same operation is sent again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import jigcmd
from tests.required import unavailable

pytestmark = pytest.mark.envelope

_EXAMPLE = Path(jigcmd.__file__).parent / "example"
_BINDING = _EXAMPLE / "binding.toml"
# SQLite's WAL: a 32-byte header, then frames of a 24-byte header and one 4096-byte page.
_WAL_HEADER = 32
_FRAME = 24 + 4096


def _jigcmd(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def lock(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example Binding admitted into a fresh lock; the envelope must be buildable here."""
    state = tmp_path_factory.mktemp("doctor-state")
    doctor = _jigcmd("doctor", "--state-dir", str(state))
    if doctor.returncode != 0:
        unavailable(f"jigcmd doctor says the envelope cannot be built:\n{doctor.stdout}")
    path = tmp_path_factory.mktemp("lock") / "jigcmd.lock"
    admitted = _jigcmd("lock", "--binding", str(_BINDING), "--lock", str(path))
    assert admitted.returncode == 0, admitted.stderr
    return path


def _call(operation: str) -> str:
    """The Run/1 call of the example's passing tests as operation `operation`."""
    passing = str(_EXAMPLE / "candidates" / "passing")
    made = _jigcmd("request", "tests", "--files", passing, "--operation-id", operation)
    assert made.returncode == 0, made.stderr
    return made.stdout


def _serve_once(lock: Path, state: Path, call: str) -> tuple[dict[str, Any], str, int]:
    """`jigcmd serve` given one call: its one answer, its stderr and its exit status."""
    done = _jigcmd(
        "serve",
        "--binding",
        str(_BINDING),
        "--lock",
        str(lock),
        "--state-dir",
        str(state),
        "--run-id",
        "run-w",
        stdin=call,
    )
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    found: dict[str, Any] = json.loads(lines[0])
    return found, done.stderr, done.returncode


class _Server:
    """A `jigcmd serve` child on a state directory, fed one call at a time."""

    def __init__(self, lock: Path, state: Path) -> None:
        command = [sys.executable, "-m", "jigcmd", "serve", "--binding", str(_BINDING)]
        command += ["--lock", str(lock), "--state-dir", str(state), "--run-id", "run-w"]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def answer(self, call: str) -> dict[str, Any]:
        """Send one call line; the server's answer to it."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(call)
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, self.finish()
        found: dict[str, Any] = json.loads(line)
        return found

    def kill(self) -> None:
        self.process.kill()
        self.process.communicate(timeout=60)

    def finish(self) -> str:
        """Close its input; its stderr once it has exited."""
        _, err = self.process.communicate(timeout=60)
        return err


@pytest.fixture
def killed(lock: Path, tmp_path: Path) -> Path:
    """A state directory whose server completed `op1` and was SIGKILLed (history in the WAL)."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    server = _Server(lock, state)
    try:
        assert "result" in server.answer(_call("op1"))
    finally:
        server.kill()
    assert (state / "journal.sqlite3-wal").stat().st_size > _WAL_HEADER + 20 * _FRAME
    return state


def _cut(wal: Path, frame: int) -> None:
    with open(wal, "r+b") as handle:
        handle.truncate(_WAL_HEADER + frame * _FRAME)


def _corrupt(wal: Path, frame: int) -> None:
    with open(wal, "r+b") as handle:
        handle.seek(_WAL_HEADER + frame * _FRAME + 24 + 100)
        handle.write(b"\x55" * 2000)


_DAMAGE: dict[str, Callable[[Path], None]] = {
    "emptied": lambda wal: os.truncate(wal, 0),
    "cut to its header": lambda wal: _cut(wal, 0),
    "cut at frame 15": lambda wal: _cut(wal, 15),
    "cut at frame 20": lambda wal: _cut(wal, 20),
    "frame 15 corrupt": lambda wal: _corrupt(wal, 15),
    "frame 20 corrupt": lambda wal: _corrupt(wal, 20),
}


@pytest.mark.parametrize("damage", list(_DAMAGE))
def test_a_wal_that_lost_commits_is_refused_and_the_operation_never_runs_again(
    lock: Path, killed: Path, damage: str
) -> None:
    """SQLite would stop at the damage and drop later commits; serve refuses and says so."""
    wal = killed / "journal.sqlite3-wal"
    _DAMAGE[damage](wal)
    before = wal.read_bytes()
    answer, err, status = _serve_once(lock, killed, _call("op1"))
    assert "result" not in answer, answer
    assert "jigcmd cannot serve" in answer["error"]["message"], answer
    assert "journal.sqlite3-wal" in err and "committed" in err, err
    assert status == 2
    assert wal.read_bytes() == before
    # The refusal changed nothing: the next start, and a verb that only reads, refuse too.
    for verb in ("recover", "runs"):
        again = _jigcmd(verb, "--state-dir", str(killed))
        assert "committed to it" in again.stderr, again.stderr
    assert wal.read_bytes() == before


@pytest.mark.parametrize("shm", ["kept", "lost"])
def test_a_journal_refused_for_its_corrupt_wal_keeps_the_wal_byte_for_byte(
    lock: Path, killed: Path, shm: str
) -> None:
    """The refusal says to keep the directory to inspect it: the WAL is still there, unchanged.

    Without its -shm the WAL's last commit is unknown; the database then holds no journal.
    """
    wal = killed / "journal.sqlite3-wal"
    _corrupt(wal, 0)
    if shm == "lost":
        (killed / "journal.sqlite3-shm").unlink()
    said = "ends at frame 0, though" if shm == "kept" else "holds no journal"
    before = wal.read_bytes()
    answer, err, status = _serve_once(lock, killed, _call("op1"))
    assert "jigcmd cannot serve" in answer["error"]["message"], answer
    assert f"move {killed} aside" in err and status == 2
    assert wal.read_bytes() == before
    again = _jigcmd("recover", "--state-dir", str(killed))
    assert wal.read_bytes() == before
    assert said in err and said in again.stderr, again.stderr


def test_a_wal_removed_under_an_idle_server_keeps_no_call_it_said_did_not_run(
    lock: Path, tmp_path: Path
) -> None:
    """The answer said nothing ran: the operation is not in the journal and runs when sent again."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    server = _Server(lock, state)
    assert "result" in server.answer(_call("op1"))
    for name in ("journal.sqlite3-wal", "journal.sqlite3-shm"):
        (state / name).unlink()
    refused = server.answer(_call("op2"))["error"]["message"]
    assert "nothing ran" in refused, refused
    assert "nothing ran" in server.answer(_call("op2"))["error"]["message"]
    server.finish()
    runs = _jigcmd("runs", "--state-dir", str(state))
    assert "op2" not in runs.stdout, runs.stdout
    assert "op1" in runs.stdout, runs.stdout
    again = _Server(lock, state)
    try:
        assert "result" in again.answer(_call("op2"))
        assert "result" in again.answer(_call("op1"))
    finally:
        again.finish()
    assert "write-ahead log journal.sqlite3-wal was removed" in refused, refused


def _drop_table(state: Path, table: str) -> None:
    """Drop `table` in a commit left in the WAL (no checkpoint, no close), as a crash leaves it."""
    script = (
        "import os, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA wal_autocheckpoint = 0')\n"
        f"c.execute('DROP TABLE {table}')\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(state / "journal.sqlite3")], check=True)


def test_a_start_refused_for_a_missing_table_changes_no_file(lock: Path, killed: Path) -> None:
    """The refusal's close must not fold the WAL into the database and remove it: the next
    verb would then say the newest operations are gone, which they are not."""
    _drop_table(killed, "waiters")
    # The -shm is SQLite's index, rebuilt by whoever opens first after a crash: not compared.
    names = ("journal.sqlite3", "journal.sqlite3-wal")
    before = {name: (killed / name).read_bytes() for name in names}
    answer, err, status = _serve_once(lock, killed, _call("op1"))
    assert "jigcmd cannot serve" in answer["error"]["message"], answer
    assert "table 'waiters' is missing" in err and status == 2, err
    assert {name: (killed / name).read_bytes() for name in names} == before
    for verb in ("recover", "runs"):
        again = _jigcmd(verb, "--state-dir", str(killed))
        assert "table 'waiters' is missing" in again.stderr, again.stderr
    assert {name: (killed / name).read_bytes() for name in names} == before
    assert (killed / "journal.sqlite3-shm").is_file()


# The WAL index header: two 48-byte copies; SQLite writes the second, then the first.
_SHM_COPY = 48
_NPAGE = 20  # offset of `nPage` in one copy


def _flip_shm(state: Path, copy: int) -> None:
    """Flip one bit of `nPage` in header copy `copy` of the -shm (its checksum then fails)."""
    with open(state / "journal.sqlite3-shm", "r+b") as handle:
        handle.seek(copy * _SHM_COPY + _NPAGE)
        (byte,) = handle.read(1)
        handle.seek(copy * _SHM_COPY + _NPAGE)
        handle.write(bytes([byte ^ 1]))


@pytest.mark.parametrize("copy", [0, 1])
def test_a_cut_wal_is_refused_though_one_copy_of_the_index_header_is_damaged(
    lock: Path, killed: Path, copy: int
) -> None:
    """One damaged copy of the -shm header does not switch the check off: the other names
    the last commit, and the cut WAL is refused as without the damage."""
    _cut(killed / "journal.sqlite3-wal", 15)
    _flip_shm(killed, copy)
    answer, err, status = _serve_once(lock, killed, _call("op1"))
    assert "result" not in answer, answer
    assert "ends at frame" in err and "committed" in err and status == 2, err


def test_an_index_header_with_no_readable_copy_is_said_not_checked(
    lock: Path, killed: Path
) -> None:
    """Neither copy readable: SQLite's own start leaves that (docs/protocols.md), so it is
    not refused, but the operator is told the cut-WAL check was not made."""
    _flip_shm(killed, 0)
    _flip_shm(killed, 1)
    answer, err, _ = _serve_once(lock, killed, _call("op1"))
    assert "result" in answer, answer
    assert "journal.sqlite3-shm" in err and "not checked" in err, err
    again = _jigcmd("runs", "--state-dir", str(killed))
    assert "not checked" not in again.stderr, again.stderr  # that start rebuilt the index
