"""A `jigcmd` started with stdout closed (`>&-`) refuses before doing anything.

fd 1 gets /dev/null at start (so that no file opened later takes the number), which would
otherwise let every verb run, a serve call included, with its result thrown away and exit 0.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.admitted_example import EXAMPLE, admit_example

_REFUSED = "standard output is closed: "
_NOTHING_RAN = "; nothing ran"


def _closed(
    *args: str, stdout: str = ">&-", stdin: bytes = b""
) -> subprocess.CompletedProcess[str]:
    """`python -m jigcmd ARGS` through a shell that closes fd 1 (`stdout`) first."""
    return subprocess.run(
        ["sh", "-c", f'exec "$0" "$@" {stdout}', sys.executable, "-m", "jigcmd", *args],
        input=stdin.decode(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )


def _assert_refused(done: subprocess.CompletedProcess[str], who: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"{who}: {_REFUSED}"), done.stderr
    assert done.stderr.endswith(f"{_NOTHING_RAN}\n"), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


@pytest.mark.envelope
def test_serve_with_stdout_closed_runs_no_call(tmp_path: Path) -> None:
    """The Flow call is not run (no state directory is made) and the status is 2."""
    binding = admit_example(tmp_path)
    state = tmp_path / "state"
    sent = (binding.parent / "requests" / "flow.jsonl").read_bytes()
    done = _closed("serve", "--binding", str(binding), "--state-dir", str(state), stdin=sent)
    _assert_refused(done, "jigcmd serve")
    assert not state.exists()


def test_lock_and_init_with_stdout_closed_write_nothing(tmp_path: Path) -> None:
    """`lock` writes no lock and `init` no Binding: each verb is refused before it acts."""
    example = Path(shutil.copytree(EXAMPLE, tmp_path / "example"))
    _assert_refused(_closed("lock", "--binding", str(example / "binding.toml")), "jigcmd lock")
    assert not (example / "jigcmd.lock").exists()
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE / "candidates" / "passing", project)
    _assert_refused(_closed("init", str(project)), "jigcmd init")
    assert sorted(path.name for path in project.iterdir()) == sorted(
        path.name for path in (EXAMPLE / "candidates" / "passing").iterdir()
    )


@pytest.mark.parametrize(
    "args",
    [
        ["runs"],
        ["prune", "--older-than", "1d"],
        ["key"],
        ["recover"],
        ["jarvis-audit"],
        ["doctor"],
        ["verify", "statement.json"],
        ["attest", "--run-id", "run-1", "op-1"],
        ["request", "test", "--files", "."],
        ["run", "--binding", "binding.toml", "test", "--files", ".", "--json"],
        ["demo"],
    ],
)
def test_every_verb_that_prints_its_result_is_refused(tmp_path: Path, args: list[str]) -> None:
    """Status 2 and one stderr line naming the verb, whatever its other options."""
    state = tmp_path / "state"
    done = _closed(*args, "--state-dir", str(state)) if args[0] != "request" else _closed(*args)
    _assert_refused(done, f"jigcmd {args[0]}")
    assert not state.exists()


def test_help_and_version_with_stdout_closed_are_refused() -> None:
    """argparse would print them to the /dev/null on fd 1 and exit 0."""
    _assert_refused(_closed("--version"), "jigcmd")
    _assert_refused(_closed("runs", "--help"), "jigcmd")


def test_attest_to_a_file_still_runs_with_stdout_closed(tmp_path: Path) -> None:
    """`attest --out` writes no result to stdout: it is looked up (here: not found, 1)."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    out = tmp_path / "statement.json"
    done = _closed(
        "attest", "--run-id", "run-1", "op-1", "--out", str(out), "--state-dir", str(state)
    )
    assert _REFUSED not in done.stderr
    assert done.returncode != 2, done.stderr


def test_stdout_on_dev_null_is_not_refused() -> None:
    """Discarding the result on purpose (`>/dev/null`) is an open stdout: the verb runs."""
    done = _closed("--version", stdout=">/dev/null")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


@pytest.mark.envelope
def test_serve_with_stdin_closed_says_no_request_came(tmp_path: Path) -> None:
    """fd 0 closed (`<&-`) reads as an empty input: the usual line, status 0."""
    binding = admit_example(tmp_path)
    state = tmp_path / "state"
    done = _closed("serve", "--binding", str(binding), "--state-dir", str(state), stdout="<&-")
    assert done.returncode == 0, done.stderr
    assert "jigcmd serve: stdin closed before any request: nothing to answer" in done.stderr
