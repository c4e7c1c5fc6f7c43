"""Let go of the file pages a long-lived server mapped as it started and does not use.

Importing an extension maps far more of its file than the server runs afterwards: the
module's initialisation calls code spread over the whole library, and the kernel maps the
pages around each fault too (fault-around). `cryptography`'s Rust core alone stays 6-7 MiB
resident after its import, none of it shared with another process; libcrypto and libsqlite3
add more. Those pages are the file's own, byte for byte, yet they count in the server's RSS
and PSS until memory runs short.

After its warm-up the server lets go of them (`release_file_pages`): for every private,
non-writable mapping of a file that holds no page of its own (no anonymous and no dirty
page, so each resident page is the page cache's), `madvise(MADV_DONTNEED)` takes the pages
out of the process's page tables. Nothing is lost: the page cache keeps them as long as the
kernel likes, and a page the server touches again comes back by a minor fault (or is read
from the file, like any page reclaimed under memory pressure). A writable mapping, or one
holding a private copy (the relocated data of a library), is never touched: dropping it
would put the file's unrelocated bytes back. Measured in docs/performance.md.
"""

from __future__ import annotations

import ctypes
import logging
import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from jigcmd.envelope.syscalls import typed

__all__ = ["FileMapping", "Released", "releasable", "release_after_start", "release_file_pages"]

_MADV_DONTNEED = 4
_PAGE_KB = 4
_madvise = typed("madvise", ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
# `start-end perms offset dev inode pathname`: the header of each mapping in smaps.
_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ (\d+)\s*(.*)$")
# Fields of a mapping whose pages are not the file's own, or that madvise would refuse.
_DISQUALIFYING = ("Anonymous", "Private_Dirty", "Shared_Dirty", "Locked", "Swap")


class FileMapping(NamedTuple):
    """One mapping whose resident pages are all the file's: where it is, how much is in."""

    start: int
    end: int
    path: str
    resident_kb: int


class Released(NamedTuple):
    """What one release took out of the page tables."""

    mappings: int
    kb: int


class _Reading(NamedTuple):
    start: int
    end: int
    perms: str
    inode: int
    path: str
    fields: dict[str, int]


def releasable(smaps: Iterable[str]) -> list[FileMapping]:
    """The mappings in `smaps` (the lines of /proc/<pid>/smaps) safe to drop from memory."""
    return [
        FileMapping(reading.start, reading.end, reading.path, reading.fields["Rss"])
        for reading in _readings(smaps)
        if _only_the_files_pages(reading)
    ]


def release_file_pages(smaps_path: str = "/proc/self/smaps") -> Released:
    """Drop the calling process's releasable file pages; a mapping madvise refuses is left."""
    # Read line by line: the whole text (~100 KiB here) would leave the server's heap larger
    # than the pages it releases from some libraries.
    with open(smaps_path, encoding="utf-8", errors="replace") as file:
        mappings = releasable(file)
    done = [m for m in mappings if _madvise(m.start, m.end - m.start, _MADV_DONTNEED) == 0]
    return Released(len(done), sum(mapping.resident_kb for mapping in done))


def release_after_start(logger: logging.Logger) -> None:
    """`release_file_pages` once a server has started, its outcome logged at debug level.

    A failure (no procfs, say) is only logged: the server goes on with the pages it has.
    """
    try:
        released = release_file_pages()
    except OSError as exc:
        logger.debug("file pages not released: %s", exc)
        return
    logger.debug("released %d KiB of file pages from %d mappings", released.kb, released.mappings)


def _only_the_files_pages(reading: _Reading) -> bool:
    fields = reading.fields
    return (
        reading.inode != 0
        and reading.path.startswith("/")
        and not reading.path.endswith(" (deleted)")
        # Private and never writable: no write through it reached the file or a copy.
        and reading.perms[1] == "-"
        and reading.perms[3] == "p"
        and fields.get("Rss", 0) > 0
        and fields.get("KernelPageSize", 0) == _PAGE_KB
        and all(fields.get(name, 1) == 0 for name in _DISQUALIFYING)
    )


def _readings(smaps: Iterable[str]) -> Iterator[_Reading]:
    reading: _Reading | None = None
    for line in smaps:
        header = _HEADER.match(line)
        if header is not None:
            if reading is not None:
                yield reading
            start, end, perms, inode, path = header.groups()
            reading = _Reading(int(start, 16), int(end, 16), perms, int(inode), path.rstrip(), {})
            continue
        name, colon, value = line.partition(":")
        words = value.split()
        if reading is not None and colon and words and words[0].isdigit():
            reading.fields[name] = int(words[0])
    if reading is not None:
        yield reading
