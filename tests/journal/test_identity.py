"""Process identity: pid + start time + boot id, so a recycled pid is never mistaken."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.journal.identity import (
    ProcessIdentity,
    current,
    identify,
    is_alive,
    kill_and_wait,
    process_start,
    wait_exit,
)


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A child that lives until its stdin closes; killed by its pid if a test leaves it."""
    proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    assert proc.stdin is not None
    proc.stdin.close()


def test_the_current_process_is_alive() -> None:
    """Our own identity is alive and names this boot."""
    assert is_alive(current())


def test_a_recycled_pid_is_not_the_recorded_process(child: subprocess.Popen[bytes]) -> None:
    """Same pid, other start time: not alive, and kill_and_wait does not signal it."""
    real = identify(child.pid)
    assert real is not None
    impostor = ProcessIdentity(pid=real.pid, start=real.start + 1, boot_id=real.boot_id)
    assert not is_alive(impostor)
    assert kill_and_wait(impostor, 0)
    assert child.poll() is None
    assert is_alive(real)


def test_a_process_of_another_boot_is_never_alive(child: subprocess.Popen[bytes]) -> None:
    """A recorded identity from another boot is gone whatever pid it had."""
    real = identify(child.pid)
    assert real is not None
    other = ProcessIdentity(pid=real.pid, start=real.start, boot_id="another-boot")
    assert not is_alive(other)
    assert wait_exit(other, 0)


def test_kill_and_wait_kills_the_very_process(child: subprocess.Popen[bytes]) -> None:
    """kill_and_wait SIGKILLs the live process it names and reports it gone."""
    real = identify(child.pid)
    assert real is not None
    assert kill_and_wait(real, 10)
    assert child.wait() == -9
    assert not is_alive(real)


def test_a_zombie_counts_as_gone(child: subprocess.Popen[bytes]) -> None:
    """An exited but unreaped child runs nothing: not alive, and its exit is seen at once."""
    real = identify(child.pid)
    assert real is not None
    assert child.stdin is not None
    child.stdin.close()
    assert wait_exit(real, 10)
    assert not is_alive(real)
    child.wait()


def test_the_start_time_is_read_past_a_command_name_with_parentheses(tmp_path: Path) -> None:
    """A comm like `x) (y z` does not shift the stat fields."""
    script = tmp_path / "x) (y z"
    script.write_text("#!/bin/sh\nread line\n")
    script.chmod(0o755)
    proc = subprocess.Popen([str(script)], stdin=subprocess.PIPE)
    try:
        with open(f"/proc/{proc.pid}/stat", "rb") as handle:
            assert b"(x) (y z)" in handle.read()
        start = process_start(proc.pid)
        assert start is not None
        assert start >= (process_start(os.getpid()) or 0)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    assert process_start(proc.pid) is None


def test_an_identity_of_another_pid_namespace_is_never_read_nor_signalled_here(
    child: subprocess.Popen[bytes],
) -> None:
    """Its pid names another process here (this child, say): refused, not signalled."""
    real = identify(child.pid)
    assert real is not None and real.pidns == os.stat("/proc/self/ns/pid").st_ino
    elsewhere = real._replace(pidns=real.pidns + 1)
    for check in (is_alive, lambda who: kill_and_wait(who, 0), lambda who: wait_exit(who, 0)):
        with pytest.raises(ValueError, match="another PID namespace"):
            check(elsewhere)
    assert child.poll() is None
