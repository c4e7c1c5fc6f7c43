"""`--stdin-file F` reads no more of F than shows it too long, and never waits on a FIFO
to be opened: /dev/zero once grew jigcmd to 24 GB, and a FIFO blocked it for ever."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

TOO_LONG = "it holds more than 16,384 bytes, the most a command's stdin may (rule stdin)"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "package.json").write_text('{"name": "p"}\n')
    (root / "a.test.ts").write_text('import {test} from "bun:test";\ntest("a", () => {});\n')
    return root


def _one_gib_of_memory() -> None:
    # Far above what jigcmd needs; an unbounded read of /dev/zero ends here, not the host.
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def request(
    project: Path, stdin_file: str, pass_fds: tuple[int, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`jigcmd request` with `--stdin-file`; a timeout so that a hang fails, not waits."""
    argv = ["request", "tests", "--files", str(project), "--stdin-file", stdin_file]
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *argv],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
        preexec_fn=_one_gib_of_memory, pass_fds=pass_fds,
    )  # fmt: skip


def test_dev_zero_is_refused_after_the_limit(project: Path) -> None:
    done = request(project, "/dev/zero")
    assert done.returncode == 2, done.stderr
    assert f"--stdin-file /dev/zero: {TOO_LONG}" in done.stderr


def test_a_regular_file_past_the_limit_is_refused_by_the_same_words(project: Path) -> None:
    big = project.parent / "big.txt"
    big.write_text("a" * 16_385)
    done = request(project, str(big))
    assert done.returncode == 2, done.stderr
    assert f"--stdin-file {big}: {TOO_LONG}" in done.stderr


def test_a_fifo_no_process_writes_to_is_an_empty_stdin_not_a_hang(project: Path) -> None:
    fifo = project.parent / "fifo"
    os.mkfifo(fifo)
    done = request(project, str(fifo))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["params"]["input"]["stdin"] == ""


def test_a_pipe_as_a_shells_process_substitution_gives_it_is_read(project: Path) -> None:
    """`--stdin-file <(printf 'hi\\n')`: /dev/fd/N, a pipe, read to its end."""
    read_end, write_end = os.pipe()
    os.write(write_end, b"hi\n")
    os.close(write_end)
    try:
        done = request(project, f"/dev/fd/{read_end}", pass_fds=(read_end,))
    finally:
        os.close(read_end)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["params"]["input"]["stdin"] == "hi\n"
