"""Durable ownership: the SQLite journal, process identity and the root envelope reservations."""

from __future__ import annotations

from jigcmd.journal.identity import ProcessIdentity
from jigcmd.journal.jarvis import AuditRow, JarvisRun
from jigcmd.journal.rows import Begin, NewRow, Row
from jigcmd.journal.store import Journal, JournalError

__all__ = [
    "AuditRow",
    "Begin",
    "JarvisRun",
    "Journal",
    "JournalError",
    "NewRow",
    "ProcessIdentity",
    "Row",
]
