"""The real filesystem as a `HostView`: what policy evaluation may ask the host."""

from __future__ import annotations

import os
import stat

__all__ = ["OsHostView"]


class OsHostView:
    """Answers from the live filesystem; symlinks and `..` are resolved before any check."""

    def realpath(self, path: str) -> str | None:
        """See `HostView.realpath`."""
        try:
            real = os.path.realpath(path, strict=True)
        except (OSError, ValueError):
            return None
        return real

    def is_dir(self, path: str) -> bool:
        """See `HostView.is_dir`."""
        try:
            return stat.S_ISDIR(os.stat(path).st_mode)
        except (OSError, ValueError):
            return False

    def is_executable(self, path: str) -> bool:
        """See `HostView.is_executable`."""
        try:
            mode = os.stat(path).st_mode
        except (OSError, ValueError):
            return False
        return stat.S_ISREG(mode) and bool(mode & 0o111)
