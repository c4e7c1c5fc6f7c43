"""A full disk at each durable step: nothing acquired outlives the failure, nothing is lost."""

from __future__ import annotations

import errno

import pytest

from jigcmd.errors import Code, JigError
from jigcmd.journal.reservations import Reservations
from jigcmd.ownership import Ownership
from tests.faults.disk import SmallDisk


def test_a_slot_whose_tag_cannot_be_written_is_free_again_once_space_returns(
    small_disk: SmallDisk,
) -> None:
    """Acquiring on a full disk fails with ENOSPC and leaves the slot free, not wedged."""
    slots = Reservations(small_disk.path, 1)
    small_disk.fill()
    with pytest.raises(OSError, match="No space left") as failed:
        slots.acquire("op-1")
    assert failed.value.errno == errno.ENOSPC
    assert slots.in_use() == 0
    small_disk.free()
    slot = slots.acquire("op-2")
    assert slot is not None
    slot.release()


def test_a_full_disk_when_taking_a_slot_is_execution_failed_naming_the_cause(
    small_disk: SmallDisk,
) -> None:
    """The server's reservation turns ENOSPC into EXECUTION_FAILED (nothing ran), not a crash."""
    ownership = Ownership.open(small_disk.path, 2, 256 * 1024 * 1024)
    try:
        small_disk.fill()
        with pytest.raises(JigError) as failed:
            ownership.reserve("op-1")
        assert failed.value.code is Code.EXECUTION_FAILED
        assert "No space left on device" in failed.value.message
        assert "nothing ran" in failed.value.message
        assert ownership.reservations.in_use() == 0
    finally:
        ownership.close()
