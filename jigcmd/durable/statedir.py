"""Where jigcmd keeps what must outlive a process: the journal and the envelope slot locks.

Default: `$JIGCMD_STATE_DIR` when set; else `/var/lib/jigcmd` for root; otherwise
`$XDG_STATE_HOME/jigcmd`, or `~/.local/state/jigcmd` when XDG_STATE_HOME is unset or not
absolute (the XDG Base Directory rule). `--state-dir` overrides them all. Every jigcmd
process that uses the same directory shares its operation identities and its envelope slots.

The directory is created 0700. An existing one is refused when it is not a directory, is
owned by another user, or is writable by group or others: whoever can write it can forge
journal rows or hold every slot. A verb that only reads what was recorded there
(`existing_state_dir`) creates nothing: a directory that is missing, or holds no journal,
is refused with its path.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "StateDirError",
    "checked_state_dir",
    "default_state_dir",
    "existing_state_dir",
    "prepare_state_dir",
]

_ROOT_DEFAULT = Path("/var/lib/jigcmd")


class StateDirError(Exception):
    """Raised when the state directory cannot be created or is not safe to use."""

    def __init__(self, reason: str, fix: str | None = None) -> None:
        super().__init__(reason if fix is None else f"{reason}; {fix}")
        self.reason = reason
        self.fix = fix

    def __reduce__(self) -> tuple[type[StateDirError], tuple[str, str | None]]:
        return type(self), (self.reason, self.fix)


def default_state_dir(*, euid: int | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The default state directory for user `euid` (the caller by default) and `environ`."""
    euid = os.geteuid() if euid is None else euid
    environ = os.environ if environ is None else environ
    # For whoever starts jigcmd without a command line of their own to edit (an MCP host's
    # `env` entry, a test), as `JIGCMD_CGROUP_BASE` is for the cgroup base.
    named = environ.get("JIGCMD_STATE_DIR", "")
    if named:
        return Path(named)
    if euid == 0:
        return _ROOT_DEFAULT
    xdg = environ.get("XDG_STATE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "jigcmd"
    home = environ.get("HOME") or os.path.expanduser("~")
    if not os.path.isabs(home):
        raise StateDirError(
            "no state directory: HOME is not an absolute path and XDG_STATE_HOME is unset",
            "pass --state-dir DIR",
        )
    return Path(home) / ".local" / "state" / "jigcmd"


def prepare_state_dir(path: Path) -> Path:
    """Create `path` (0700, parents as needed) or check an existing one; return it absolute."""
    path = Path(os.path.abspath(path))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise StateDirError(f"state directory {path} cannot be created: {exc.strerror}") from exc
    try:
        info = os.stat(path)
    except OSError as exc:
        raise StateDirError(f"state directory {path} cannot be read: {exc.strerror}") from exc
    return _checked(path, info)


def checked_state_dir(path: Path) -> Path:
    """`path`, absolute, checked as `prepare_state_dir` checks it; never creates anything."""
    path = Path(os.path.abspath(path))
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise StateDirError(
            f"state directory {path} does not exist (nothing was created)", "check --state-dir"
        ) from None
    except OSError as exc:
        raise StateDirError(f"state directory {path} cannot be read: {exc.strerror}") from exc
    return _checked(path, info)


def existing_state_dir(path: Path, *, holding: str) -> Path:
    """`checked_state_dir(path)`, also refused when it holds no file `holding` (the journal).

    For a verb that reads what was recorded there: a missing directory, or one without the
    journal, is refused naming the path.
    """
    path = checked_state_dir(path)
    if not (path / holding).exists():
        raise StateDirError(
            f"state directory {path} holds no {holding}: nothing was recorded there "
            "(nothing was created)",
            "check --state-dir",
        )
    return path


def _checked(path: Path, info: os.stat_result) -> Path:
    """`path` if it is a directory of ours that no one else may write; else StateDirError."""
    if not stat.S_ISDIR(info.st_mode):
        raise StateDirError(f"state directory {path} is not a directory")
    if info.st_uid != os.geteuid():
        raise StateDirError(
            f"state directory {path} is owned by uid {info.st_uid}, not by this user "
            f"(uid {os.geteuid()})",
            "use a directory of your own (--state-dir)",
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise StateDirError(
            f"state directory {path} is writable by group or others "
            f"(mode {stat.S_IMODE(info.st_mode):04o})",
            f"run chmod 700 {path}",
        )
    return path
