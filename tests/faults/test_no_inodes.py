"""No inode left on the state directory's filesystem: each refusal names the file it could not
make, and says inodes may be what is missing.

The files a start makes come in an order the code may change, so each case runs on a tmpfs
of every small inode count in turn, and checks the refusal that count gave.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from tests.faults.test_journal_start import _jigcmd
from tests.ownedmounts import fresh_point, tmpfs
from tests.required import unavailable

# Enough for a fresh start to fail at each of its first files, and then to get past them.
_INODE_COUNTS = range(4, 13)


@contextlib.contextmanager
def _tmpfs(inodes: int) -> Iterator[Path]:
    """A tmpfs `jigcmd-faults` with `inodes` inodes and a 0700 state directory in it."""
    point = fresh_point("faults")
    with contextlib.ExitStack() as stack:
        options = f"size=2m,mode=0700,nr_inodes={inodes}"
        try:
            stack.enter_context(tmpfs(point, "jigcmd-faults", options))
        except OSError as exc:
            unavailable(f"cannot mount a tmpfs: {exc}")
        state = point / "state"
        state.mkdir(mode=0o700)
        yield state


def test_a_liveness_lock_no_inode_is_left_for_names_its_file_and_inodes(tmp_path: Path) -> None:
    """`jigcmd recover` names <state>/live/<lock>, not a bare lock name, and says `df -i`."""
    if os.geteuid() != 0:
        unavailable("mounting a tmpfs needs root")
    seen = []
    for inodes in _INODE_COUNTS:
        with _tmpfs(inodes) as state:
            stderr = _jigcmd("recover", "--state-dir", str(state)).stderr.decode()
            if "liveness lock" in stderr and "No space left" in stderr:
                seen.append(inodes)
                # The lock file by its path (never its bare name), or its directory.
                named = (f"liveness lock {state}/live/", f"{state}/live cannot be created")
                assert any(path in stderr for path in named), stderr
                assert "df -i" in stderr, stderr
    assert seen, f"no inode count in {_INODE_COUNTS} failed at the liveness lock"
