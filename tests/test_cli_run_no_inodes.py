"""`jigcmd run` on a state directory whose filesystem runs out of inodes as the envelope is
registered: the refusal names the registry entry it could not make."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.faults.test_no_inodes import _tmpfs
from tests.required import unavailable
from tests.test_cli_run import CANDIDATES, lock, run

pytestmark = pytest.mark.envelope

__all__ = ["lock"]  # the module-scoped fixture, shared with tests/test_cli_run.py

# From too few for the slots to enough for the whole run: one of them ends at the registry.
_INODE_COUNTS = range(12, 25)


def test_an_envelope_entry_no_inode_is_left_for_is_named(lock: Path, tmp_path: Path) -> None:
    """Not "envelope registry: No space left on device": the entry's path, under envelopes/."""
    if os.geteuid() != 0:
        unavailable("mounting a tmpfs needs root")
    seen = []
    for inodes in _INODE_COUNTS:
        with _tmpfs(inodes) as state:
            done = run(lock, state, "tests", CANDIDATES / "passing")
            if "envelope registry" in done.stderr:
                seen.append(inodes)
                assert f"envelope registry entry {state}/envelopes/" in done.stderr, done.stderr
                assert "No space left on device" in done.stderr, done.stderr
    assert seen, f"no inode count in {_INODE_COUNTS} failed at the envelope registry"
