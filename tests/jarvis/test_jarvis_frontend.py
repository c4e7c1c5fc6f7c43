"""Start-up refusals of `jigcmd jarvis`; the journal as store, recovery, `jigcmd jarvis-audit`."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.cli import main
from jigcmd.frontends.jarvis import _cwds_holding, jarvis, jarvis_audit
from jigcmd.jarvis.policy import parse_policy
from jigcmd.jarvis.server import LoopbackError, bind_loopback
from jigcmd.journal.store import Journal
from tests.faults.disk import required_disk
from tests.jarvis.jarvis_harness import ACTOR, TOKEN, SpyExecutor, harness, make_service

POLICY = (
    'search_path = ["/usr/bin"]\n[[rule]]\nname = "echo"\ndecision = "allow"\nargv0 = ["echo"]\n'
)


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return path


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1", "::", "example.com", "127.0.0.1.nip.io"])
def test_binding_anything_but_loopback_is_refused(host: str) -> None:
    """Wildcard, routable and name addresses are refused before any socket is bound."""
    with pytest.raises(LoopbackError, match="loopback"):
        bind_loopback(host, 0)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_loopback_addresses_are_bound(host: str) -> None:
    """IPv4 and IPv6 loopback (and `localhost`) bind."""
    try:
        sock = bind_loopback(host, 0)
    except OSError as exc:
        pytest.skip(f"{host} unavailable here: {exc}")
    with sock:
        assert sock.getsockname()[1] > 0


def test_jarvis_refuses_to_start_without_a_token(
    policy_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No JARVIS_BEARER_TOKEN: exit 2 with the reason, nothing bound."""
    monkeypatch.delenv("JARVIS_BEARER_TOKEN", raising=False)
    assert jarvis(policy_file, "127.0.0.1", 0, tmp_path / "state") == 2
    assert "JARVIS_BEARER_TOKEN is not set" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (",", "is set to ',', which names no capability"),
        (" ", "is set to ' ', which names no capability"),
        ("", "is set to '', which names no capability"),
        ("run:read,", "is set to 'run:read,', whose entry 2 is empty"),
    ],
)
def test_jarvis_refuses_to_start_on_a_capability_list_that_names_nothing(
    value: str, said: str, policy_file: Path, tmp_path: Path
) -> None:
    """A set JARVIS_UTCP_CAPABILITIES naming no grant is exit 2, never the full owner grant."""
    env = {**os.environ, "JARVIS_BEARER_TOKEN": TOKEN, "JARVIS_UTCP_CAPABILITIES": value}
    command = ["jarvis", "--policy", str(policy_file), "--port", "0"]
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", *command, "--state-dir", str(tmp_path / "state")],
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"jigcmd jarvis: JARVIS_UTCP_CAPABILITIES {said}; "), line


@pytest.mark.parametrize(
    ("text", "message"),
    [("[[rule]]\nname = 3", "rule[0]: name must match"), ("= nope", "not valid TOML")],
)
def test_jarvis_refuses_a_broken_policy_with_a_precise_error(
    text: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A broken rule file: exit 2 naming the file and the failing place; the token never shown."""
    monkeypatch.setenv("JARVIS_BEARER_TOKEN", TOKEN)
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert jarvis(path, "127.0.0.1", 0, tmp_path / "state") == 2
    err = capsys.readouterr().err
    assert f"{path}: " in err
    assert message in err
    assert TOKEN not in err


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--port", "70000"], "argument --port: 70000 is not a port (0 to 65535; 0: any free one)"),
        (["--port", "-1"], "argument --port: '-1' is not a whole number"),
        (["--max-envelopes", "0"], "argument --max-envelopes: 0 is not at least 1"),
    ],
)
def test_an_impossible_port_or_slot_count_is_a_usage_error(
    option: list[str], message: str, policy_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused as the command line is read: exit 2 and argparse's words, no traceback."""
    assert main(["jarvis", "--policy", str(policy_file), *option]) == 2
    err = capsys.readouterr().err
    assert f"jigcmd jarvis: error: {message}" in err
    assert "Traceback" not in err


def test_jarvis_refuses_a_non_loopback_host(
    policy_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--host 0.0.0.0` is refused with exit 2."""
    monkeypatch.setenv("JARVIS_BEARER_TOKEN", TOKEN)
    assert jarvis(policy_file, "0.0.0.0", 0, tmp_path / "state") == 2
    assert "not a loopback address" in capsys.readouterr().err


async def test_the_journal_serves_as_the_run_store_and_audit_prints_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs and decisions land in the SQLite journal; `jarvis-audit` prints them as JSON lines."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    with Journal.open(state) as journal:
        async with harness(make_service(SpyExecutor(), policy=POLICY, store=journal)) as h:
            allowed = (await h.invoke("jarvis.run.create", argv=["echo", "hi"])).json()
            await h.invoke("jarvis.run.create", argv=["rm", "x"])
        stored = journal.jarvis_get(allowed["run_id"])
    assert stored is not None
    assert (stored.status, stored.exit_code, stored.actor) == ("exited", 0, ACTOR)
    assert jarvis_audit(state, 10) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["tool"], r["decision"]) for r in lines] == [
        ("jarvis.run.create", "allow"),
        ("jarvis.run.create", "allow"),
        ("jarvis.run.create", "deny"),
    ]
    assert lines[1]["outcome"] == f"run {allowed['run_id']}: exited (exit 0)"
    assert {r["actor"] for r in lines} == {ACTOR}
    assert TOKEN not in json.dumps(lines)


def test_audit_reads_a_state_directory_on_a_read_only_mount(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A surviving state directory mounted read-only: its audit printed, status 0."""
    with required_disk() as disk:
        with Journal.open(disk.path) as journal:
            journal.audit(
                actor=ACTOR,
                tool="jarvis.run.create",
                argv=["rm", "x"],
                cwd="",
                decision="deny",
                matched_rule=None,
                outcome="denied",
            )
        disk.read_only()
        assert jarvis_audit(disk.path, 10) == 0
    (line,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (line["argv"], line["decision"]) == (["rm", "x"], "deny")


def test_audit_of_a_mistyped_state_dir_creates_nothing_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`jarvis-audit --state-dir /typo/path`: one line naming the path, no directory, no journal."""
    assert jarvis_audit(tmp_path / "typo" / "path", 10) == 2
    err = capsys.readouterr().err
    assert err == (
        f"jigcmd jarvis-audit: state directory {tmp_path}/typo/path does not exist (nothing was "
        "created); check --state-dir\n"
    )
    assert list(tmp_path.iterdir()) == []


async def test_a_run_left_running_by_a_dead_server_is_closed_as_uncertain(tmp_path: Path) -> None:
    """On start, a `running` row whose owner process is gone becomes `uncertain` and is audited."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    with Journal.open(state) as journal:
        run_id = journal.jarvis_begin(
            tool="jarvis.run.create",
            argv=["echo"],
            cwd="",
            actor=ACTOR,
            decision="allow",
            matched_rule="echo",
            reason="allowed",
        )
        # Pretend its owner died: rewrite the owner to an identity that cannot be alive.
        with contextlib.closing(sqlite3.connect(journal.path)) as conn, conn:
            conn.execute("UPDATE jarvis_runs SET boot_id = 'gone' WHERE run_id = ?", (run_id,))
        async with harness(make_service(SpyExecutor(), policy=POLICY, store=journal)):
            pass
        stored = journal.jarvis_get(run_id)
        rows = journal.audit_rows(5)
    assert stored is not None
    assert stored.status == "uncertain"
    assert "uncertain" in rows[0].outcome
    assert stored.detail == "its jarvis process died while it ran"


def test_a_rule_whose_working_directories_hold_the_state_directory_is_named(
    tmp_path: Path,
) -> None:
    """The rules that allow a cwd holding the state directory (and its mount) are found."""
    state = tmp_path / "state"
    policy = parse_policy(
        'search_path = ["/usr/bin"]\n'
        f'[[rule]]\nname = "above"\ndecision = "allow"\nargv0 = ["ls"]\ncwd = ["{tmp_path}"]\n'
        f'[[rule]]\nname = "below"\ndecision = "allow"\nargv0 = ["ls"]\ncwd = ["{state}"]\n'
        f'[[rule]]\nname = "deny"\ndecision = "deny"\nargv0 = ["ls"]\ncwd = ["{tmp_path}"]\n'
    )
    assert _cwds_holding(policy, state) == [("above", str(tmp_path))]


@pytest.mark.envelope
def test_an_envelope_that_cannot_start_is_one_line_before_anything_is_served(
    policy_file: Path, tmp_path: Path
) -> None:
    """The zygote's start fails: exit 2, one line, no traceback, and no "serving" line
    announcing an address that never served.

    What fails is the zygote's own import of pyroute2 (only the zygote imports it; a
    package of that name earlier on the path refuses to load): a state directory the zygote
    could not stage in is refused before (`test_jarvis_state_files.py`)."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    shadow = tmp_path / "shadow" / "pyroute2"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("withheld by the test")\n')
    path = os.pathsep.join([str(shadow.parent), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "JARVIS_BEARER_TOKEN": TOKEN, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "jarvis", "--policy", str(policy_file), "--port", "0",
         "--state-dir", str(state)],
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    said = "jigcmd jarvis: EXECUTION_FAILED: containment envelope unavailable"
    assert line.startswith(said), line
    # The step in its own words; no Python class name (the zygote's report drops it).
    assert "the netlink request for lo could not be encoded" in line, line
    assert "NetnsError" not in line, line
