"""Reading back the one file a plan names in the candidate's scratch, after the run.

The scratch (`/tmp` of the envelope) belongs to the candidate: whatever is at the name may
be a symbolic link to a host file, a FIFO nobody writes, a directory, or far too large. The
file is opened relative to a descriptor of the scratch's root that pid 1 took while it
built the root (before any candidate code ran), by one path component, without following a
link, without blocking, and read only when it is a regular file within the bound. It is
read once every process of the run is gone, so nothing writes it meanwhile.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import NamedTuple

from jigcmd.plan import ScratchFile

__all__ = ["ScratchRead", "read_scratch_file", "valid_name"]

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = 1 << 20


class ScratchRead(NamedTuple):
    """The plan's `scratch_file` as found after the run: its bytes, or why there are none.

    Written in the candidate's scratch, so candidate-influenced whatever it holds. `problem`
    is empty when `data` is the whole file; otherwise it says why nothing was read ("missing",
    "a symbolic link (not followed)", "not a regular file", "larger than N bytes", …). A
    NamedTuple, which the zygote sends without msgspec (`jigcmd.envelope.stdjson`).
    """

    data: bytes | None
    problem: str = ""


def valid_name(name: str) -> bool:
    """Whether `name` is one path component (not empty, not `.` or `..`, no `/` or NUL)."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name


def read_scratch_file(scratch: int, spec: ScratchFile) -> ScratchRead:
    """The file `spec` names below the scratch descriptor `scratch`, or why it is not read."""
    if not valid_name(spec.name):
        return ScratchRead(None, f"the name {spec.name!r} is not one path component")
    if scratch < 0:
        return ScratchRead(None, "the scratch directory was not available")
    try:
        fd = os.open(spec.name, _OPEN_FLAGS, dir_fd=scratch)
    except FileNotFoundError:
        return ScratchRead(None, "missing")
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return ScratchRead(None, "a symbolic link (not followed)")
        return ScratchRead(None, f"unreadable: {exc.strerror or exc}")
    try:
        return _read(fd, spec.max_bytes)
    finally:
        os.close(fd)


def _read(fd: int, limit: int) -> ScratchRead:
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ScratchRead(None, "not a regular file")
        if info.st_size > limit:
            return ScratchRead(None, f"larger than {limit} bytes ({info.st_size} bytes)")
        data = bytearray()
        while len(data) <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - len(data)))
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        return ScratchRead(None, f"unreadable: {exc.strerror or exc}")
    if len(data) > limit:
        return ScratchRead(None, f"larger than {limit} bytes")
    return ScratchRead(bytes(data))
