"""A small tmpfs of our own that a test fills to make the disk full, and empties again."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.ownedmounts import fresh_point, tmpfs
from tests.required import unavailable

__all__ = ["SmallDisk", "mounted", "required_disk"]


class SmallDisk:
    """A mounted tmpfs that `fill` makes full (`leave`: all but some) and `free` empties."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._filler = path / "jigcmd-filler"

    def fill(self) -> None:
        """Write filler until the filesystem refuses with ENOSPC, down to the last byte."""
        fd = os.open(self._filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            for size in (1 << 16, 4096, 1):
                block = b"\0" * size
                while True:
                    try:
                        os.write(fd, block)
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        break
        finally:
            os.close(fd)

    def leave(self, free_bytes: int) -> None:
        """Fill the filesystem, then give back `free_bytes` (rounded to its pages) of it."""
        self.fill()
        size = self._filler.stat().st_size
        os.truncate(self._filler, max(0, size - free_bytes))

    def read_only(self) -> None:
        """Remount the filesystem read-only (root ignores file modes; a mount does not)."""
        subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True)

    def free(self) -> None:
        """Remove the filler: the space is available again."""
        with contextlib.suppress(FileNotFoundError):
            self._filler.unlink()


@contextlib.contextmanager
def mounted(size: str = "4m") -> Iterator[SmallDisk | str]:
    """A tmpfs `jigcmd-faults` of `size` (root only; tests/ownedmounts.py), or why not."""
    point = fresh_point("faults")
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(tmpfs(point, "jigcmd-faults", f"size={size},mode=0700"))
        except OSError as exc:
            yield f"cannot mount a tmpfs: {exc}"
            return
        yield SmallDisk(point)


@contextlib.contextmanager
def required_disk() -> Iterator[SmallDisk]:
    """A 4 MiB `mounted` tmpfs under `parent`; skipped (failed under CI) without root or mount."""
    if os.geteuid() != 0:
        unavailable("mounting a tmpfs needs root")
    with mounted() as disk:
        if isinstance(disk, str):
            unavailable(disk)
        yield disk
