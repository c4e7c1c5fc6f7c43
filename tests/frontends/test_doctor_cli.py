"""`jigcmd doctor` run as a user runs it: its summary names what failed, and it creates
nothing in the state directory it inspects."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jigcmd.durable.statedir import StateDirError, prepare_state_dir
from jigcmd.journal import schema
from jigcmd.journal.schema import SCHEMA_VERSION
from jigcmd.journal.store import DB_NAME, Journal

# Every doctor run ends with its end-to-end check, which builds a real envelope (where it
# can: the assertions hold on a machine that cannot, too).
pytestmark = pytest.mark.envelope

_ENVELOPE_SENTENCE = "the envelope cannot be built here"


def doctor(
    *argv: str, home: Path, state_env: Path | None = None
) -> subprocess.CompletedProcess[str]:
    # HOME and XDG_STATE_HOME point into the test's directory: a default state directory
    # that doctor created would show up there.
    env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / "xdg")}
    env.pop("JIGCMD_STATE_DIR", None)
    if state_env is not None:
        env["JIGCMD_STATE_DIR"] = str(state_env)
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", "doctor", *argv],
        capture_output=True, text=True, timeout=300, check=False, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def checks(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    return {check["check"]: check for check in json.loads(done.stdout)}


def test_a_missing_state_dir_serve_would_make_is_a_warning_and_nothing_is_created(
    tmp_path: Path,
) -> None:
    """`serve --state-dir` makes it 0700 and starts: the doctor says so, and makes none of it."""
    missing = tmp_path / "new" / "deeper" / "state"
    done = doctor("--json", "--state-dir", str(missing), home=tmp_path)
    found = checks(done)
    assert found["state"]["status"] == "warn", found["state"]
    assert found["state"]["detail"] == (
        f"{missing} does not exist yet (nothing was created); serve and run create it 0700 "
        "on first use"
    )
    assert (found["signing key"]["status"], found["signing key"]["detail"]) == (
        "ok",
        f"no host key yet: serve and run make one in {missing}",
    )
    assert "serve and run would not start" not in done.stdout
    assert sorted(os.listdir(tmp_path)) == []


def test_a_missing_state_dir_serve_would_refuse_fails_with_serves_reason(
    tmp_path: Path,
) -> None:
    """Under a directory others may write: serve refuses it, and the doctor in its words."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    missing = shared / "state"
    done = doctor("--json", "--state-dir", str(missing), home=tmp_path)
    found = checks(done)
    assert (done.returncode, found["state"]["status"]) == (1, "FAIL"), done.stdout
    with pytest.raises(StateDirError) as refused:
        prepare_state_dir(missing)
    assert found["state"]["detail"] == refused.value.reason
    assert found["signing key"]["status"] == "warn", found["signing key"]
    assert os.listdir(shared) == []


def test_the_default_state_dir_not_made_yet_is_a_warning_and_stays_unmade(
    tmp_path: Path,
) -> None:
    """Without --state-dir: said to be made on first use, and not made by doctor.

    The default is named by JIGCMD_STATE_DIR, as an MCP host's `env` entry names it (the
    XDG one is root's /var/lib/jigcmd when the tests run as root).
    """
    default = tmp_path / "default" / "jigcmd"
    done = doctor("--json", home=tmp_path, state_env=default)
    state = checks(done)["state"]
    assert state["status"] == "warn", state
    assert state["detail"].startswith(f"{default} does not exist yet (nothing was created)")
    assert os.listdir(tmp_path) == []


def test_a_state_dir_without_a_journal_is_said_so_and_none_is_made(tmp_path: Path) -> None:
    """No journal, marker or slots appear; the line says there is no journal yet."""
    state_dir = prepare_state_dir(tmp_path / "state")
    done = doctor("--json", "--state-dir", str(state_dir), home=tmp_path)
    state = checks(done)["state"]
    assert (state["status"], state["detail"]) == (
        "ok",
        f"{state_dir}: no journal yet (nothing was created); serve and run make one",
    )
    assert os.listdir(state_dir) == []


def test_an_existing_journal_is_read_and_no_slot_file_is_made(tmp_path: Path) -> None:
    """The journal is read, not written: the directory holds what it held before, but for
    the index and log SQLite keeps beside a journal it reads (as `jigcmd runs` reads it)."""
    state_dir = prepare_state_dir(tmp_path / "state")
    with Journal.open(state_dir):
        pass
    before = sorted(os.listdir(state_dir))
    done = doctor("--json", "--state-dir", str(state_dir), home=tmp_path)
    state = checks(done)["state"]
    assert state["status"] == "ok", state
    assert state["detail"].startswith(f"{state_dir}: 0 run(s) open, 0 of ")
    assert DB_NAME in before and "slots" not in before
    after = [name for name in os.listdir(state_dir) if not name.endswith(("-shm", "-wal"))]
    assert sorted(after) == before


def test_a_journal_of_the_previous_schema_is_a_warning_until_a_writer_migrates_it(
    tmp_path: Path,
) -> None:
    """After an upgrade the doctor warns (serve and run migrate it as they open it); it said
    FAIL "serve and run would not start". `jigcmd recover` brings it up; then it is ok."""
    state_dir = prepare_state_dir(tmp_path / "state")
    raw = sqlite3.connect(state_dir / DB_NAME, isolation_level=None)
    try:
        for step in schema._STEPS[: SCHEMA_VERSION - 1]:
            for statement in schema._statements(step):
                raw.execute(statement)
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    finally:
        raw.close()
    state = checks(doctor("--json", "--state-dir", str(state_dir), home=tmp_path))["state"]
    assert state["status"] == "warn", state
    assert f"schema version {SCHEMA_VERSION - 1}, older than this jigcmd's" in state["detail"]
    assert "serve, run and `jigcmd recover` bring it up to date" in state["detail"]
    recovered = subprocess.run(
        [sys.executable, "-m", "jigcmd", "recover", "--state-dir", str(state_dir)],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert recovered.returncode == 0, recovered.stderr
    state = checks(doctor("--json", "--state-dir", str(state_dir), home=tmp_path))["state"]
    assert state["status"] == "ok", state


def test_the_summary_names_the_failed_kind_and_not_the_envelope_for_a_binding(
    tmp_path: Path,
) -> None:
    """A Binding that cannot be read: the summary names the Binding; the envelope sentence
    appears only when an envelope check failed."""
    state_dir = prepare_state_dir(tmp_path / "state")
    missing = tmp_path / "nonexist.toml"
    argv = ("--state-dir", str(state_dir), "--binding", str(missing))
    done = doctor(*argv, home=tmp_path)
    assert done.returncode == 1
    summary = done.stdout.splitlines()[-1]
    envelope_failed = any(
        status == "FAIL" and name not in ("binding", "state")
        for name, status in (
            (check["check"], check["status"])
            for check in checks(doctor("--json", *argv, home=tmp_path)).values()
        )
    )
    assert "checks failed (" in summary and "binding" in summary.split(":")[0], summary
    assert "the Binding cannot be loaded" in summary
    assert (_ENVELOPE_SENTENCE in summary) == envelope_failed, summary


def test_a_state_dir_that_is_a_file_is_named_in_the_summary(tmp_path: Path) -> None:
    """A regular file as --state-dir: "state directory" failed, in the summary's words."""
    afile = tmp_path / "afile"
    afile.write_text("")
    done = doctor("--state-dir", str(afile), home=tmp_path)
    summary = done.stdout.splitlines()[-1]
    assert done.returncode == 1
    assert "state directory" in summary.split(":")[0], summary
    assert "the state directory cannot be used as it is" in summary


def test_a_jarvis_policy_that_cannot_be_read_is_named_in_the_summary(tmp_path: Path) -> None:
    """`--jarvis-policy` naming no file: the summary says jarvis would refuse it; the envelope
    sentence only if an envelope check failed too."""
    state_dir = prepare_state_dir(tmp_path / "state")
    argv = ("--state-dir", str(state_dir), "--jarvis-policy", str(tmp_path / "none.toml"))
    done = doctor(*argv, home=tmp_path)
    assert done.returncode == 1
    summary = done.stdout.splitlines()[-1]
    assert "jarvis policy" in summary.split(":")[0], summary
    assert "jarvis would refuse to start with this policy" in summary
    failed = {
        name
        for name, check in checks(doctor("--json", *argv, home=tmp_path)).items()
        if check["status"] == "FAIL"
    }
    assert (_ENVELOPE_SENTENCE in summary) == bool(failed - {"jarvis policy", "state"}), summary
