"""`StepError`: a step of building, running or releasing an envelope failed, and why."""

from __future__ import annotations

__all__ = ["CHANGED_STEPS", "CWD_CHANGED", "HOST_DIR_CHANGED", "PROGRAM_CHANGED", "StepError"]

# The steps that fail when an exact path of a host plan (see exact.py) is no longer what the
# plan named: a symlink appeared in it, or it is gone. Nothing ran.
CWD_CHANGED = "cwd changed"
PROGRAM_CHANGED = "program changed"
HOST_DIR_CHANGED = "host directory changed"
CHANGED_STEPS = frozenset({CWD_CHANGED, PROGRAM_CHANGED, HOST_DIR_CHANGED})


class StepError(Exception):
    """The step that failed (`step`) and the error in words (`error`)."""

    def __init__(self, step: str, error: BaseException | str) -> None:
        super().__init__(f"{step}: {error}")
        self.step = step
        self.error = error.strerror or str(error) if isinstance(error, OSError) else str(error)
