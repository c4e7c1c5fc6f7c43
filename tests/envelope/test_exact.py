"""Exact paths: opened as written, never through a symlink, and a failure that says what changed."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from jigcmd.envelope.exact import exec_path, open_exact, open_exact_program
from jigcmd.envelope.failure import CWD_CHANGED, PROGRAM_CHANGED, StepError


def test_a_path_without_a_symlink_opens() -> None:
    """A resolved directory opens as an O_PATH descriptor of that very directory."""
    here = Path(os.path.realpath(Path(__file__).parent))
    fd = open_exact(str(here), CWD_CHANGED)
    try:
        assert os.path.samestat(os.fstat(fd), here.stat())
    finally:
        os.close(fd)


@pytest.mark.parametrize("where", ["last", "middle"])
def test_a_symlink_anywhere_in_the_path_is_refused_as_a_change(tmp_path: Path, where: str) -> None:
    """A link as the last component or on the way fails the step with the path named."""
    real = Path(os.path.realpath(tmp_path))
    (real / "target" / "sub").mkdir(parents=True)
    (real / "link").symlink_to(real / "target")
    path = real / "link" if where == "last" else real / "link" / "sub"
    with pytest.raises(StepError) as caught:
        open_exact(str(path), CWD_CHANGED)
    assert (caught.value.step, caught.value.error) == (
        CWD_CHANGED,
        f"{path} has a symlink in it now",
    )


def test_a_path_that_is_gone_is_refused_as_a_change(tmp_path: Path) -> None:
    """A removed path fails the step saying it no longer exists."""
    path = Path(os.path.realpath(tmp_path)) / "gone"
    with pytest.raises(StepError, match="no longer exists") as caught:
        open_exact(str(path), CWD_CHANGED)
    assert caught.value.step == CWD_CHANGED


def test_a_program_must_still_be_a_regular_file(tmp_path: Path) -> None:
    """A directory where the program was is a changed program, not something to exec."""
    path = Path(os.path.realpath(tmp_path)) / "tool"
    path.mkdir()
    with pytest.raises(StepError, match="no longer a regular file") as caught:
        open_exact_program(str(path))
    assert caught.value.step == PROGRAM_CHANGED


def _programs(tmp_path: Path) -> tuple[Path, Path]:
    """`tool` (a copy of true) and `other` (a copy of false), in a resolved directory."""
    real = Path(os.path.realpath(tmp_path))
    tool, other = real / "tool", real / "other"
    shutil.copy2(shutil.which("true") or "/bin/true", tool)
    shutil.copy2(shutil.which("false") or "/bin/false", other)
    return tool, other


def _run(path: str, argv0: str) -> int:
    pid = os.posix_spawn(path, [argv0], {})
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_the_program_runs_through_the_opened_descriptor(tmp_path: Path) -> None:
    """A program's exec path is its descriptor's, which pid 1 keeps until the spawn."""
    tool, _ = _programs(tmp_path)
    fd = open_exact_program(str(tool))
    try:
        assert exec_path(fd, str(tool)) == f"/proc/self/fd/{fd}"
        assert os.get_inheritable(fd) is False
    finally:
        os.close(fd)


@pytest.mark.parametrize("swap", ["symlink", "rename"])
def test_a_program_swapped_after_the_open_is_not_what_runs(tmp_path: Path, swap: str) -> None:
    """A symlink (or another file) put at the path after the exact open: the opened file runs."""
    tool, other = _programs(tmp_path)
    fd = open_exact_program(str(tool))
    try:
        tool.rename(tool.with_name("tool.aside"))
        if swap == "symlink":
            tool.symlink_to(other)
        else:
            other.rename(tool)
        assert _run(str(tool), "tool") == 1  # what the path reaches now
        assert _run(exec_path(fd, str(tool)), "tool") == 0  # what was opened
    finally:
        os.close(fd)


def test_a_script_is_executed_by_its_checked_path(tmp_path: Path) -> None:
    """A `#!` script keeps its path: its interpreter opens the script by the name it is given."""
    script = Path(os.path.realpath(tmp_path)) / "script"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    fd = open_exact_program(str(script))
    try:
        assert exec_path(fd, str(script)) == str(script)
        assert _run(exec_path(fd, str(script)), "script") == 3
    finally:
        os.close(fd)


def test_a_program_pid_1_cannot_read_runs_through_its_descriptor() -> None:
    """Execute-only: no script pid 1's credentials could run, so the descriptor is executed.

    Checked by uid 65534 when the test runs as root (root reads a file whatever its mode),
    in a directory that user may search.
    """
    base = Path("/var/tmp") / f"jigcmd-test-{uuid.uuid4().hex[:12]}"
    base.mkdir(mode=0o755)
    base.chmod(0o755)
    try:
        tool, _ = _programs(base)
        tool.chmod(0o111)

        def check() -> bool:
            fd = open_exact_program(str(tool))
            try:
                through = exec_path(fd, str(tool))
                return through == f"/proc/self/fd/{fd}" and _run(through, "tool") == 0
            finally:
                os.close(fd)

        assert _unprivileged(check)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _unprivileged(check: Callable[[], bool]) -> bool:
    """`check()` in a child process, as uid and gid 65534 when this process is root."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's result is its exit status
        ok = False
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            ok = check()
        finally:
            os._exit(0 if ok else 1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
