"""Root's jigcmd and a state directory whose path another user can reach: nothing written there.

The other user is a throw-away uid that no account has; its steps run as that uid
(`subprocess.run(user=...)`), in a directory of its own under a root-owned scratch
directory in `/tmp` (pytest's own is 0700, out of that user's reach).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.lifetime.candidates import QUICK, cli_input
from tests.lifetime.frames import flow_call
from tests.lifetime.rig import Rig
from tests.required import require_root
from tests.rootless.rig import unused_uid

# serve starts envelopes (cgroups, Bun) on the state directories that pass.
pytestmark = pytest.mark.envelope

_SECRET = b"root:SECRET-HASH:19000:0:99999:7:::\nline2\n"
# Failsafes only (a verb that hangs fails here instead of holding the suite), no timing claim.
_VERB_TIMEOUT_S = 120


@dataclass(frozen=True)
class Hostile:
    """A root-owned scratch directory, and in it `home`: a directory the other user owns."""

    base: Path
    home: Path
    uid: int

    def as_other(self, *argv: str | Path) -> None:
        """Run `argv` as the other user (its own uid and gid, no supplementary groups)."""
        subprocess.run(
            [str(arg) for arg in argv],
            user=self.uid,
            group=self.uid,
            extra_groups=[],
            check=True,
            timeout=_VERB_TIMEOUT_S,
        )

    def victim(self) -> Path:
        """A root-only file (0600 in a 0700 directory) the other user wants overwritten."""
        private = self.base / "private"
        private.mkdir(mode=0o700)
        path = private / "shadow"
        path.write_bytes(_SECRET)
        path.chmod(0o600)
        return path


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    """The scratch directory (`jigcmd-` named, removed after) and the other user's home in it."""
    require_root("needs root: the other user is a uid root runs a helper as")
    base = Path(tempfile.mkdtemp(prefix="jigcmd-statepath-", dir="/tmp"))
    try:
        base.chmod(0o755)
        uid = unused_uid()
        home = base / "home"
        home.mkdir(mode=0o755)
        os.chown(home, uid, uid)
        yield Hostile(base, home, uid)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _jigcmd(*argv: str | Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *(str(arg) for arg in argv)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=_VERB_TIMEOUT_S,
        check=False,
    )


def test_a_state_dir_link_another_user_planted_is_refused_by_every_verb(
    hostile: Hostile, binding: Path
) -> None:
    """`state -> <root's dir>` in the other user's directory: refused, naming it; none written."""
    target = hostile.base / "rootdir"
    target.mkdir(mode=0o755)
    (target / "passwd").write_text("keep\n")
    state = hostile.home / "state"
    hostile.as_other("ln", "-s", target, state)
    named = f"{hostile.home}, on the state directory's path, is owned by uid {hostile.uid}"
    for argv in (
        ("serve", "--binding", binding, "--state-dir", state),
        ("prune", "--older-than", "1d", "--state-dir", state),
        ("runs", "--state-dir", state),
    ):
        done = _jigcmd(*argv)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert named in done.stderr, (argv, done.stderr)
    doctor = _jigcmd("doctor", "--state-dir", state)
    line = _state_line(doctor.stdout)
    assert line.startswith("FAIL") and named in line, doctor.stdout
    assert sorted(os.listdir(target)) == ["passwd"]


def test_slots_another_user_may_write_are_refused_before_a_slot_is_written(
    hostile: Hostile, binding: Path
) -> None:
    """`slots/` 1777 with the other user's `slot-0 -> root-only file`: serve and doctor refuse."""
    victim = hostile.victim()
    state = hostile.base / "state"
    state.mkdir(mode=0o711)  # the other user may pass through, as after a restore gone wrong
    (state / "slots").mkdir()
    (state / "slots").chmod(0o1777)
    hostile.as_other("ln", "-s", victim, state / "slots" / "slot-0")
    call = flow_call("c1", "op-1", cli_input(QUICK, "tok"))
    served = _jigcmd("serve", "--binding", binding, "--state-dir", state, stdin=_line(call))
    assert served.returncode == 2, served.stdout + served.stderr
    assert f"{state}/slots is writable by group or others (mode 1777)" in served.stderr
    assert f"remove {state}/slots" in served.stderr
    doctor = _jigcmd("doctor", "--state-dir", state)
    line = _state_line(doctor.stdout)
    assert line.startswith("FAIL") and f"{state}/slots is writable" in line, doctor.stdout
    assert victim.read_bytes() == _SECRET


def test_a_symlinked_journal_is_refused_at_start_by_doctor_and_serve(
    hostile: Hostile, binding: Path
) -> None:
    """journal.sqlite3 moved elsewhere behind a link: refused at once, not at every call."""
    state = hostile.base / "state"
    state.mkdir(mode=0o700)
    made = _jigcmd("serve", "--binding", binding, "--state-dir", state)
    assert made.returncode == 0, made.stderr
    elsewhere = hostile.base / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    for stale in state.glob("journal.sqlite3-*"):
        stale.unlink()
    (state / "journal.sqlite3").rename(elsewhere / "journal.sqlite3")
    (state / "journal.sqlite3").symlink_to(elsewhere / "journal.sqlite3")
    named = f"journal file {state}/journal.sqlite3 is a symbolic link"
    doctor = _jigcmd("doctor", "--state-dir", state)
    line = _state_line(doctor.stdout)
    assert line.startswith("FAIL") and named in line, doctor.stdout
    call = flow_call("c1", "fresh-op", cli_input(QUICK, "tok"))
    served = _jigcmd("serve", "--binding", binding, "--state-dir", state, stdin=_line(call))
    assert served.returncode == 2, served.stdout + served.stderr
    assert named in served.stderr and "move the whole state directory" in served.stderr


def test_doctor_reports_a_fifo_where_a_slot_file_belongs_instead_of_waiting_on_it(
    hostile: Hostile, binding: Path
) -> None:
    """`slots/slot-0` a FIFO: doctor finishes, its state line naming the file."""
    state = hostile.base / "state"
    state.mkdir(mode=0o700)
    made = _jigcmd("serve", "--binding", binding, "--state-dir", state)
    assert made.returncode == 0, made.stderr
    (state / "slots" / "slot-0").unlink(missing_ok=True)
    os.mkfifo(state / "slots" / "slot-0", 0o600)
    doctor = _jigcmd("doctor", "--state-dir", state)
    line = _state_line(doctor.stdout)
    assert line.startswith("FAIL") and f"{state}/slots/slot-0 is not a regular file" in line


def test_a_state_dir_renamed_after_start_is_not_written_through_a_planted_link(
    rig: Rig, tmp_path: Path
) -> None:
    """The path re-pointed after the start's checks: the slot is the held directory's, never
    the file a link at the old path names."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    victim = private / "shadow"
    victim.write_bytes(_SECRET)
    server = rig.serve(max_envelopes=1)
    token = f"tok-{uuid.uuid4().hex}"
    server.send(flow_call("c1", "op-1", cli_input(QUICK, token)))
    first = server.answer("c1")
    assert "result" in first, first
    moved = tmp_path / "moved"
    rig.state_dir.rename(moved)
    try:
        (rig.state_dir / "slots").mkdir(mode=0o700, parents=True)
        (rig.state_dir / "slots" / "slot-0").symlink_to(victim)
        server.send(flow_call("c2", "op-2", cli_input(QUICK, token)))
        server.answer("c2")
        assert victim.read_bytes() == _SECRET
        server.close_input()
    finally:
        shutil.rmtree(rig.state_dir)
        moved.rename(rig.state_dir)


def _state_line(stdout: str) -> str:
    """doctor's `state` check line (status, name, detail)."""
    (line,) = [line for line in stdout.splitlines() if line.split()[1:2] == ["state"]]
    return line


def _line(message: object) -> str:
    return json.dumps(message) + "\n"
