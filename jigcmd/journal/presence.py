"""Whether a state directory holds a journal to read, for the verbs that only read one.

A first start on a full disk leaves `journal.sqlite3` behind as an empty file: SQLite makes it
before it can write a page, and nothing else (no marker, no WAL) follows. That holds no
history and never did, so it reads as no journal yet, as a directory without one does; an
empty file beside a marker or a WAL is a lost journal, refused as such by the open
(`jigcmd.journal.marker`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from jigcmd.journal.database import DB_NAME
from jigcmd.journal.marker import MARKER_NAME

__all__ = ["holds_journal"]


def holds_journal(state_dir: Path) -> bool:
    """Whether `state_dir` holds a journal to open: False when there is none, or only the
    empty file a failed first start left (no marker, no WAL beside it)."""
    path = state_dir / DB_NAME
    if not path.exists():
        return False
    try:
        info = os.lstat(path)
    except OSError:
        return True  # the open says what is wrong with it
    if not stat.S_ISREG(info.st_mode) or info.st_size > 0:
        return True
    beside = (MARKER_NAME, f"{DB_NAME}-wal")
    return any(os.path.lexists(state_dir / name) for name in beside)
