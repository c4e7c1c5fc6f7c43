"""What lies in jarvis's state directory is checked file by file before it serves.

The real `jigcmd jarvis` (and `serve`, same checks) as a child: each refusal is status 2 at
start with the file, what is wrong and the fix on stderr, never a failure at every call.
Files are chowned to a uid no process runs as (root needed for that and for the fronts).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from jigcmd.attest.keys import HOST_KEY_NAME
from jigcmd.journal.marker import MARKER_NAME
from jigcmd.journal.store import DB_NAME
from tests.admitted_example import admit_example
from tests.jarvis.jarvis_child import POLICY, JarvisChild, machine_runs_jarvis
from tests.jarvis.jarvis_harness import TOKEN, auth, invoke_body
from tests.required import require_root

# A uid no process runs as: files are only chowned to it.
_OTHER = 61_999
# A failsafe for a start that should have been refused and serves instead.
_START_S = 60


@pytest.fixture(autouse=True)
def _root() -> None:
    require_root("needs root: files are chowned to another uid")


def _start(tmp_path: Path, state: Path, front: str = "jarvis") -> str:
    """`jigcmd jarvis` (or `serve`) on `state`: refused with status 2; its stderr."""
    if front == "jarvis":
        policy = tmp_path / "policy.toml"
        policy.write_text(POLICY)
        argv = ["jarvis", "--policy", str(policy), "--port", "0"]
    else:
        argv = ["serve", "--binding", str(admit_example(tmp_path))]
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", *argv, "--state-dir", str(state)],
        env={**os.environ, "JARVIS_BEARER_TOKEN": TOKEN},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=_START_S, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"jigcmd {front}: "), done.stderr
    return done.stderr


def _made(tmp_path: Path) -> Path:
    """A state directory with a journal, its marker and a host key, as a start leaves one."""
    state = tmp_path / "state"
    made = subprocess.run(
        [sys.executable, "-m", "jigcmd", "serve", "--binding", str(admit_example(tmp_path)),
         "--state-dir", str(state)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=_START_S, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert (state / DB_NAME).is_file() and (state / HOST_KEY_NAME).is_file()
    return state


@pytest.mark.parametrize("front", ["jarvis", "serve"])
@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_runtime_that_is_no_directory_is_refused_at_start(
    tmp_path: Path, kind: str, front: str
) -> None:
    """`runtime -> /usr/bin` would have the zygote mount its tmpfs over /usr/bin."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if kind == "link":
        (state / "runtime").symlink_to(elsewhere)
    else:
        os.mkfifo(state / "runtime", 0o600)
    what = "a symbolic link" if kind == "link" else "not a directory"
    stderr = _start(tmp_path, state, front)
    assert f"{state}/runtime is {what}; remove it (jigcmd makes runtime 0700 itself)" in stderr
    assert os.listdir(elsewhere) == []


@pytest.mark.parametrize("name", [DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", MARKER_NAME])
@pytest.mark.parametrize("change", ["chmod", "chown"])
def test_a_journal_file_another_user_may_rewrite_is_refused_at_start(
    tmp_path: Path, name: str, change: str
) -> None:
    """World-writable or another user's (who may chmod it): refused naming the file and fix."""
    state = _made(tmp_path)
    path = state / name
    path.touch(mode=0o600)  # SQLite's -wal and -shm are gone after a clean close
    where = f"journal file {path}"
    if change == "chmod":
        path.chmod(0o666)
        words = f"{where} is writable by group or others (mode 0666)"
        fix = f"run chmod go-w {path}"
    else:
        os.chown(path, _OTHER, _OTHER)
        words = f"{where} is owned by uid {_OTHER}, not by this user (uid 0)"
        fix = f"run chown 0 {path} if it is yours"
    stderr = _start(tmp_path, state)
    assert words in stderr and fix in stderr, stderr


def test_a_host_key_another_user_owns_is_refused_at_start(tmp_path: Path) -> None:
    """Its owner could read it and sign `run.get` answers as this host."""
    state = _made(tmp_path)
    os.chown(state / HOST_KEY_NAME, _OTHER, _OTHER)
    stderr = _start(tmp_path, state)
    assert f"signing key {state / HOST_KEY_NAME}: owned by uid {_OTHER}, not by this user" in (
        stderr
    )
    assert f"run chown 0 {state / HOST_KEY_NAME} if it is yours" in stderr


def test_a_fifo_where_a_slot_file_belongs_is_refused_at_start(tmp_path: Path) -> None:
    """Not first at a call (503): the server does not start, naming the file."""
    state = _made(tmp_path)
    slot = state / "slots" / "slot-0"
    slot.parent.mkdir(mode=0o700, exist_ok=True)
    slot.unlink(missing_ok=True)
    os.mkfifo(slot, 0o600)
    stderr = _start(tmp_path, state)
    assert f"{slot} is not a regular file; remove it (jigcmd makes slot files itself)" in stderr


def test_a_sticky_parents_entry_of_another_user_is_named_with_its_owner(tmp_path: Path) -> None:
    """`/tmp/theirs` in a sticky directory: the refusal names theirs's owner, not ours."""
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    theirs = sticky / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, _OTHER, _OTHER)
    stderr = _start(tmp_path, theirs / "state")
    assert f"{theirs} in it is uid {_OTHER}'s, neither root's nor this user's (uid 0)" in stderr


def test_what_jarvis_makes_under_umask_0_passes_its_own_checks(tmp_path: Path) -> None:
    """Journal files SQLite makes itself included: none writable by others, a restart passes."""
    machine_runs_jarvis()
    old = os.umask(0)
    try:
        jarvis = JarvisChild(tmp_path)
    finally:
        os.umask(old)
    with jarvis, httpx.Client(timeout=60.0) as client:
        body = invoke_body("jarvis.run.create", argv=["echo", "x"])
        created = client.post(f"{jarvis.base}/tools/jarvis.run.create", json=body, headers=auth())
        assert created.json()["stdout"]["text"] == "x\n", created.text
        made = {path.name: path.lstat() for path in jarvis.state_dir.rglob("*")}
        assert {f"{DB_NAME}-wal", f"{DB_NAME}-shm", HOST_KEY_NAME} <= set(made)
        open_to_others = {
            name: f"{stat.S_IMODE(info.st_mode):04o}"
            for name, info in made.items()
            if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or info.st_uid != 0
        }
        assert open_to_others == {}
        runs = subprocess.run(
            [sys.executable, "-m", "jigcmd", "runs", "--state-dir", str(jarvis.state_dir)],
            capture_output=True, text=True, timeout=_START_S, check=False,
        )  # fmt: skip
        assert runs.returncode == 0, runs.stderr
