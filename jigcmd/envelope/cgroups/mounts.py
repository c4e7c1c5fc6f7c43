"""The mount table as cgroup detection and the shared runtime read it (mountinfo(5))."""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["Mount", "read_mounts"]


class Mount(NamedTuple):
    """One line of a mountinfo file, reduced to what its readers need."""

    point: str
    fstype: str
    super_options: frozenset[str]
    # The mounted directory's path inside its filesystem, and the filesystem's source.
    root: str
    source: str


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def read_mounts(mountinfo: str = "/proc/self/mountinfo") -> list[Mount]:
    """The mounts listed in a mountinfo file."""
    mounts = []
    with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split()
            if "-" not in fields:
                continue
            sep = fields.index("-")
            if len(fields) < sep + 4 or sep < 5:
                continue
            mounts.append(
                Mount(
                    point=_unescape(fields[4]),
                    fstype=fields[sep + 1],
                    super_options=frozenset(fields[sep + 3].split(",")),
                    root=_unescape(fields[3]),
                    source=_unescape(fields[sep + 2]),
                )
            )
    return mounts
