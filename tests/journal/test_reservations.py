"""Envelope slots: exhaustion across processes, hand-over of a held slot, crashed holders."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.journal.reservations import MAX_DEFAULT_SLOTS, Reservations, default_slots

_REPO = str(Path(__file__).resolve().parents[2])

# A separate jigcmd process: takes `count` slots, says so, holds them until stdin closes.
_HOLDER = """
import sys
from pathlib import Path
from jigcmd.journal.reservations import Reservations
slots = Reservations(Path(sys.argv[1]), int(sys.argv[2]))
held = [slots.acquire(tag="other") for _ in range(int(sys.argv[3]))]
print("none" if None in held else "held", flush=True)
sys.stdin.read()
"""

# A supervisor stand-in: receives a slot descriptor with SCM_RIGHTS, holds it until stdin closes.
_RECEIVER = """
import socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
_, fds, _, _ = socket.recv_fds(sock, 1, 1)
print("got", len(fds), flush=True)
sys.stdin.read()
"""


@pytest.fixture
def spawn() -> Iterator[list[subprocess.Popen[str]]]:
    """Started helper processes; any still running at the end is killed by its pid."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def _python(code: str, *args: str, pass_fds: tuple[int, ...] = ()) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        pass_fds=pass_fds,
        env={**os.environ, "PYTHONPATH": _REPO},
    )


def _holder(state: Path, slots: int, count: int) -> subprocess.Popen[str]:
    proc = _python(_HOLDER, str(state), str(slots), str(count))
    assert proc.stdout is not None
    assert proc.stdout.readline() == "held\n"
    return proc


def test_slots_are_exhausted_across_processes_and_free_again_when_the_holder_exits(
    tmp_path: Path, spawn: list[subprocess.Popen[str]]
) -> None:
    """Another process holding every slot leaves none for us at once; its exit frees them."""
    proc = _holder(tmp_path, 2, 2)
    spawn.append(proc)
    ours = Reservations(tmp_path, 2)
    assert ours.acquire() is None
    assert ours.in_use() == 2
    assert ours.holder(0) == "other"
    assert "all 2 envelope slots are in use" in ours.exhausted_message()
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait() == 0
    slot = ours.acquire(tag="mine")
    assert slot is not None
    with slot:
        assert ours.in_use() == 1
    assert ours.in_use() == 0


def test_a_crashed_holders_slot_is_free_without_any_recovery_step(
    tmp_path: Path, spawn: list[subprocess.Popen[str]]
) -> None:
    """SIGKILL of the process holding the only slot frees it: the kernel drops the lock."""
    proc = _holder(tmp_path, 1, 1)
    spawn.append(proc)
    ours = Reservations(tmp_path, 1)
    assert ours.acquire() is None
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    slot = ours.acquire()
    assert slot is not None
    slot.release()


def test_a_slot_inherited_across_fork_stays_held_after_the_parent_closes_its_copy(
    tmp_path: Path,
) -> None:
    """The lock follows the open file description: the forked child keeps the slot alone."""
    reservations = Reservations(tmp_path, 1)
    slot = reservations.acquire(tag="run-1")
    assert slot is not None
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_w)
        os.read(go_r, 1)
        os._exit(0)
    os.close(go_r)
    slot.release()
    try:
        assert reservations.holder(0) == "run-1"
        assert reservations.acquire() is None
    finally:
        os.close(go_w)
        os.waitpid(pid, 0)
    assert reservations.holder(0) is None


def test_a_slot_sent_with_scm_rights_stays_held_by_the_receiver_alone(
    tmp_path: Path, spawn: list[subprocess.Popen[str]]
) -> None:
    """A slot passed to another process over a unix socket is held by it after we close ours."""
    reservations = Reservations(tmp_path, 1)
    slot = reservations.acquire(tag="run-2")
    assert slot is not None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours, theirs:
        proc = _python(_RECEIVER, str(theirs.fileno()), pass_fds=(theirs.fileno(),))
        spawn.append(proc)
        socket.send_fds(ours, [b"s"], [slot.fd])
        assert proc.stdout is not None
        assert proc.stdout.readline() == "got 1\n"
    slot.release()
    assert reservations.holder(0) == "run-2"
    assert reservations.acquire() is None
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait() == 0
    assert reservations.in_use() == 0


def test_releasing_a_slot_twice_is_harmless(tmp_path: Path) -> None:
    """`release` is idempotent; a released slot can be taken again."""
    reservations = Reservations(tmp_path, 1)
    slot = reservations.acquire()
    assert slot is not None
    slot.release()
    slot.release()
    again = reservations.acquire()
    assert again is not None
    again.release()


def test_zero_slots_are_refused(tmp_path: Path) -> None:
    """A slot count below one is a configuration error, named as such."""
    with pytest.raises(ValueError, match="at least 1"):
        Reservations(tmp_path, 0)


@pytest.mark.parametrize(
    ("available_kib", "cpus", "expected"),
    [
        (4 * 1024 * 1024, 2, 4),  # 4 GiB, 2 CPUs: the CPU bound (2 x 2)
        (1024 * 1024, 8, 2),  # 1 GiB: half of it is two 256 MiB envelopes
        (64 * 1024 * 1024, 64, MAX_DEFAULT_SLOTS),  # a big host is capped
        (100 * 1024, 4, 1),  # almost no memory: still one slot
    ],
)
def test_the_default_slot_count_follows_memory_cpus_and_the_cap(
    tmp_path: Path, available_kib: int, cpus: int, expected: int
) -> None:
    """min(MemAvailable/2 / 256 MiB, 2 x CPUs, 16), at least 1."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemTotal: 99999999 kB\nMemAvailable: {available_kib} kB\n")
    assert default_slots(meminfo=str(meminfo), cpus=cpus) == expected


def test_a_holders_tag_reads_back_exactly_even_after_a_longer_one(tmp_path: Path) -> None:
    """Tags are fixed-size records rewritten in place: nothing of an earlier, longer one stays."""
    reservations = Reservations(tmp_path, 1)
    first = reservations.acquire(tag="a-much-longer-run-id")
    assert first is not None
    first.release()
    second = reservations.acquire(tag="short")
    assert second is not None
    try:
        assert Reservations(tmp_path, 1).holder(0) == "short"
    finally:
        second.release()
