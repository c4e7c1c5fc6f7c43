"""A host plan's exact paths: opened without following any symlink, or the run fails.

A host plan (jarvis) names host paths that a policy resolved and checked (`jigcmd.plan`):
the working directory bound into the envelope, the host directories, the program. Any
process that may write on the way to one of them can swap a symlink in after the check;
opened the ordinary way, the envelope would then show or run what the link points to,
outside what was allowed, while every record names the checked path. Pid 1 therefore opens
each of them with openat2 and `RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`: the path is
taken exactly as written, or the open fails (ELOOP) and nothing runs. Pinning a descriptor
at the check instead would need the server to hand one per path through the zygote and the
spawner to pid 1; a resolved path re-opened exactly gives the same guarantee for a
path-based policy (what is bound is what now sits at the checked path, reached through no
link), with nothing to hand over.

The program is then executed through the very descriptor that was opened (`exec_path`:
`/proc/self/fd/N`, the kernel's fexecve), so no second lookup of its path can follow a
symlink swapped in between the open and the exec. A `#!` script is the exception: its
interpreter reads the script by the path it is given, which would be the descriptor's (gone
at the exec, being close-on-exec, or else inherited by the candidate, and a script's `$0`
would name it instead of the script); a script is executed by its checked path, and a
symlink swapped in on the way between the open and the exec is followed for it.

The failure's step says what changed (`failure.CHANGED_STEPS`), so that the caller is told why
nothing ran rather than an errno.
"""

from __future__ import annotations

import errno
import os
import stat

from jigcmd.envelope import syscalls as sc
from jigcmd.envelope.failure import PROGRAM_CHANGED, StepError

__all__ = ["exec_path", "open_exact", "open_exact_program"]

# What a `#!` script starts with (binfmt_script).
_SHEBANG = b"#!"


def open_exact(path: str, step: str) -> int:
    """An O_PATH descriptor of `path`, no symlink followed; `StepError(step, …)` if it changed.

    openat2 missing (Linux before 5.6) or refused is a failure of its own step: the path
    cannot be opened exactly, whether or not it changed.
    """
    try:
        return sc.openat2(path, os.O_PATH, sc.RESOLVE_EXACT)
    except OSError as exc:
        if exc.errno in (errno.ENOSYS, errno.EPERM):
            raise StepError("open exactly", f"openat2 unusable here: {exc.strerror}") from exc
        raise StepError(step, _changed(path, exc.errno)) from exc


def open_exact_program(path: str) -> int:
    """`open_exact` of a program, which must still be a regular file."""
    fd = open_exact(path, PROGRAM_CHANGED)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StepError(PROGRAM_CHANGED, f"{path} is no longer a regular file")
    return fd


def _changed(path: str, number: int | None) -> str:
    if number == errno.ELOOP:
        return f"{path} has a symlink in it now"
    if number == errno.ENOENT:
        return f"{path} no longer exists"
    if number == errno.ENOTDIR:
        return f"a directory on the way to {path} is no longer one"
    return f"{path}: {os.strerror(number or 0)}"


def exec_path(fd: int, path: str) -> str:
    """The path to execute the program `path`, opened as `fd` by `open_exact_program`.

    `/proc/self/fd/<fd>`: the exec reaches the opened file itself, whatever sits at `path`
    by then; `fd` must stay open until the exec, and its close-on-exec keeps it from the
    program. `path` itself for a `#!` script (see the module docstring). A file pid 1 may
    not read is no script it could run (its interpreter, with pid 1's credentials, could not
    read it either): it goes through the descriptor.
    """
    through = f"/proc/self/fd/{fd}"
    try:
        readable = os.open(through, os.O_RDONLY | os.O_NONBLOCK)
    except PermissionError:
        return through
    try:
        start = os.pread(readable, len(_SHEBANG), 0)
    finally:
        os.close(readable)
    return path if start == _SHEBANG else through
