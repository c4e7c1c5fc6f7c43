"""`jigcmd VERB | head`: a reader of stdout that went away ends any verb quietly."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import jigcmd
from jigcmd import cli
from tests.frontends.test_runs import state

__all__ = ["state"]  # the fixture, from tests/frontends/test_runs.py

EXAMPLE = Path(jigcmd.__file__).parent / "example"
STDOUT_CLOSED = 141


@pytest.fixture
def closed_pipe() -> Iterator[int]:
    """The write end of a pipe whose read end is already closed: every write is EPIPE."""
    read, write = os.pipe()
    os.close(read)
    try:
        yield write
    finally:
        os.close(write)


def jigcmd_into(stdout: int, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True, timeout=120, check=False,
    )  # fmt: skip


def test_lock_into_a_closed_pipe_writes_the_lock_and_exits_quietly(
    tmp_path: Path, closed_pipe: int
) -> None:
    """`jigcmd lock | head -1`: the lock is written, no traceback, the status a shell shows
    for SIGPIPE."""
    shutil.copytree(EXAMPLE, tmp_path / "example", ignore=shutil.ignore_patterns("jigcmd.lock"))
    binding = tmp_path / "example" / "binding.toml"
    done = jigcmd_into(closed_pipe, "lock", "--binding", str(binding))
    assert done.returncode == STDOUT_CLOSED, done.stderr
    assert done.stderr == ""
    assert (tmp_path / "example" / "jigcmd.lock").is_file()


def test_runs_json_into_a_closed_pipe_exits_quietly(state: Path, closed_pipe: int) -> None:
    """`jigcmd runs --json | head -c 100`: no traceback, the SIGPIPE status."""
    done = jigcmd_into(closed_pipe, "runs", "--state-dir", str(state), "--json")
    assert done.returncode == STDOUT_CLOSED, done.stderr
    assert done.stderr == ""


def test_run_json_into_a_closed_pipe_exits_quietly(tmp_path: Path, closed_pipe: int) -> None:
    """`jigcmd run … --json | head -c 100`, its answer written from inside its event loop."""
    done = jigcmd_into(
        closed_pipe, "run", "--binding", str(tmp_path / "missing.toml"),
        "--state-dir", str(tmp_path / "state"), "tests", "--files", str(tmp_path), "--json",
    )  # fmt: skip
    assert done.returncode == STDOUT_CLOSED, done.stderr
    assert "Traceback" not in done.stderr
    assert "INVALID_INPUT" in done.stderr


def test_a_broken_pipe_that_is_not_stdout_is_still_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stdout still read: a broken pipe elsewhere (a child's stdin) is not hidden."""
    read, write = os.pipe()

    def broken(argv: list[str] | None, *, stdout_closed: bool = False) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    with os.fdopen(read, "rb"), os.fdopen(write, "w") as healthy:
        monkeypatch.setattr(sys, "stdout", healthy)
        monkeypatch.setattr(cli, "_verb", broken)
        with pytest.raises(BrokenPipeError):
            cli.main(["runs"])
