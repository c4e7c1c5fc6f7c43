"""`jigcmd serve` answers whatever its stderr is: closed, /dev/full, a pipe nobody reads.

An embedding host may close our stderr (`2>&-`), point it at a device that refuses writes,
close the pipe's read end, or fill the pipe and never drain it. None of that may cost its
answers (docs/protocols.md: logging to stderr never blocks the server).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.admitted_example import admit_example

pytestmark = pytest.mark.envelope

_INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"host","version":"1"}}}\n'
)


@contextlib.contextmanager
def _stderr(kind: str) -> Iterator[tuple[list[str], int | None]]:
    """The argv prefix and stderr descriptor that give the child a stderr of `kind`."""
    if kind == "closed":
        yield ["sh", "-c", 'exec "$0" "$@" 2>&-'], None
    elif kind == "full device":
        with open("/dev/full", "wb") as full:
            yield [], full.fileno()
    else:
        read_fd, write_fd = os.pipe2(os.O_CLOEXEC)
        try:
            if kind == "pipe without a reader":
                os.close(read_fd)
            else:  # A full pipe whose reader never reads (until the child is gone).
                os.set_blocking(write_fd, False)
                with contextlib.suppress(BlockingIOError):
                    while True:
                        os.write(write_fd, b"x" * 4096)
                # The child's writes must wait, as on any pipe (the flag is the file's, shared).
                os.set_blocking(write_fd, True)
            yield [], write_fd
        finally:
            for fd in (read_fd, write_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)


@pytest.mark.parametrize("request_file", ["flow", "initialize"])
@pytest.mark.parametrize("kind", ["closed", "full device", "pipe without a reader", "full pipe"])
def test_serve_answers_when_its_stderr_cannot_take_a_line(
    tmp_path: Path, kind: str, request_file: str
) -> None:
    """The Flow call and MCP initialize are answered and the session ends with status 0."""
    binding = admit_example(tmp_path)
    sent = (
        (binding.parent / "requests" / "flow.jsonl").read_bytes()
        if request_file == "flow"
        else _INITIALIZE
    )
    serve = [sys.executable, "-m", "jigcmd", "serve", "--binding", str(binding)]
    serve += ["--state-dir", str(tmp_path / "state")]
    with _stderr(kind) as (prefix, stderr):
        done = subprocess.run(
            [*prefix, *serve],
            input=sent,
            stdout=subprocess.PIPE,
            stderr=stderr,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0
    answers = done.stdout.splitlines()
    assert len(answers) == 1 and b'"result"' in answers[0], done.stdout
