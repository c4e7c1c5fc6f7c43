"""Fault injection: a small tmpfs of our own that a test fills to make the disk full.

The filesystem is mounted for one test at a `/var/tmp/jigcmd-faults-<hex>` directory, with the
source name `jigcmd-faults`, and unmounted after (tests/ownedmounts.py: by the next session if
this one is killed): nothing of the real disk is ever filled. Mounting needs root; without
it a test skips locally and fails under CI.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.disk import SmallDisk, required_disk


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """A 4 MiB tmpfs mounted for this test only (root), unmounted after."""
    with required_disk() as disk:
        yield disk
