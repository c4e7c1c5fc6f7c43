"""Root envelope reservations: a fixed number of slots shared through one state directory.

Each slot is a lock file `<state>/slots/slot-<i>` held with `flock(LOCK_EX | LOCK_NB)`,
opened through the state directory's held descriptor, never through a link
(`jigcmd.journal.statefiles`).
The lock belongs to the open file description, not to a process: the server acquires a
slot, hands the descriptor to the run's supervisor (inherited across fork or sent with
SCM_RIGHTS) and closes its own copy; the lock stays held as long as any process of the
run keeps the descriptor. When the last holder dies, however it dies, the kernel drops the
lock, so a crashed holder's slot is free again with no recovery step and no race.
`Slot.release` therefore only ever closes its descriptor; it never calls `LOCK_UN`, which
would release the slot for the other holders too.

No slot free → `acquire` returns None at once (no queue). The caller turns that into
RESOURCE_EXHAUSTED ("all N envelope slots are in use").

`default_slots` derives N from the host:
    N = max(1, min(floor(MemAvailable * 0.5 / per-envelope memory ceiling), 2 * CPUs, 16))
half the memory available now, divided by what one envelope may use (256 MiB by default),
at most two envelopes per CPU (runs are mostly CPU-bound test suites) and never more than 16.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from jigcmd.journal.statefiles import open_regular, subdirectory

__all__ = ["MAX_DEFAULT_SLOTS", "Reservations", "Slot", "default_slots", "slots_held"]

MAX_DEFAULT_SLOTS = 16
_PER_ENVELOPE_BYTES = 256 * 1024 * 1024
_MAX_TAG_BYTES = 256


class Slot:
    """One held envelope slot: the locked descriptor and the slot's index."""

    def __init__(self, fd: int, index: int) -> None:
        """Wrap a descriptor that holds the slot's lock."""
        self.fd = fd
        self.index = index

    def release(self) -> None:
        """Close this copy of the descriptor; the slot is free once no copy is left (idempotent)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class Reservations:
    """The `slots` envelope slots of one state directory."""

    def __init__(self, state_dir: Path, slots: int) -> None:
        """Use (creating if needed) `<state_dir>/slots`, with `slots` ≥ 1 slots."""
        if slots < 1:
            raise ValueError(f"the number of envelope slots must be at least 1, not {slots}")
        self.slots = slots
        self.directory = state_dir / "slots"
        # Checked (ours, written by no one else) and held: a slot file is opened in it only.
        fd = subdirectory(state_dir, "slots", create=True)
        assert fd is not None  # made when missing
        self._fd = fd

    def exhausted_message(self) -> str:
        """The refusal text for a caller that found no slot free (it names no host path)."""
        return (
            f"all {self.slots} envelope slots are in use (shared by every jigcmd using this "
            "state directory); try again when a run has finished"
        )

    def acquire(self, tag: str = "") -> Slot | None:
        """Take a free slot now, or None when all are held; `holder` shows `tag` (a run id).

        OSError (the tag cannot be written: a full disk) leaves no slot held.
        """
        # Two passes: `in_use`/`holder` probe slots by locking them for an instant, and a
        # probe must not make a free slot look taken to a concurrent acquire.
        for _ in range(2):
            for index in range(self.slots):
                fd = self._open(index)
                try:
                    if _try_lock(fd):
                        _write_tag(fd, tag)
                        return Slot(fd, index)
                except BaseException:
                    # A failed step (ENOSPC writing the tag) must not keep the slot locked:
                    # closing drops the lock, so the slot is free for everyone again.
                    os.close(fd)
                    raise
                os.close(fd)
        return None

    def in_use(self) -> int:
        """How many slots are held right now (by any process)."""
        return sum(1 for index in range(self.slots) if self.holder(index) is not None)

    def holder(self, index: int) -> str | None:
        """The tag of slot `index`'s holder, or None when the slot is free."""
        return _holder(self._open(index))

    def _open(self, index: int) -> int:
        name = f"slot-{index}"
        return open_regular(self._fd, name, os.O_RDWR | os.O_CREAT, f"{self.directory / name}")


def slots_held(state_dir: Path, slots: int) -> int:
    """How many of the first `slots` slots of `state_dir` are held now; creates nothing.

    For a reader (`jigcmd doctor`): a slot file that does not exist yet is a free slot.
    """
    held = 0
    directory = subdirectory(state_dir, "slots", create=False)
    if directory is None:
        return 0
    for index in range(slots):
        name = f"slot-{index}"
        try:
            # Not blocking on a FIFO planted there: OSError naming it instead.
            fd = open_regular(directory, name, os.O_RDONLY, f"{state_dir / 'slots' / name}")
        except FileNotFoundError:
            continue
        held += _holder(fd) is not None
    return held


def _holder(fd: int) -> str | None:
    """The tag held in slot file `fd` (closed here), or None when no one holds its lock."""
    try:
        if _try_lock(fd):
            # Closing drops the probe's lock; no LOCK_UN needed.
            return None
        return os.pread(fd, _MAX_TAG_BYTES, 0).rstrip(b"\0").decode("utf-8", "replace")
    finally:
        os.close(fd)


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    return True


def _write_tag(fd: int, tag: str) -> None:
    # A fixed-size record written in place: truncating and rewriting the file changed its
    # size, which ext4 journals (~170 us measured, on every call's path); this is ~1 us.
    data = tag.encode("utf-8")[:_MAX_TAG_BYTES]
    os.pwrite(fd, data.ljust(_MAX_TAG_BYTES, b"\0"), 0)


def default_slots(
    per_envelope_bytes: int = _PER_ENVELOPE_BYTES,
    *,
    meminfo: str = "/proc/meminfo",
    cpus: int | None = None,
) -> int:
    """The host-derived slot count (see the module docstring for the formula)."""
    available = _mem_available(meminfo)
    cpus = cpus if cpus is not None else len(os.sched_getaffinity(0))
    by_memory = (available // 2) // per_envelope_bytes
    return max(1, min(by_memory, 2 * cpus, MAX_DEFAULT_SLOTS))


def _mem_available(meminfo: str) -> int:
    with open(meminfo, encoding="ascii") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key == "MemAvailable":
                # "MemAvailable:   1234567 kB"
                return int(value.split()[0]) * 1024
    raise OSError(f"{meminfo} has no MemAvailable line")
