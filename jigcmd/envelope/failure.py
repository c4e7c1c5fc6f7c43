"""`StepError`: a step of building, running or releasing an envelope failed, and why."""

from __future__ import annotations

__all__ = ["StepError"]


class StepError(Exception):
    """The step that failed (`step`) and the error in words (`error`)."""

    def __init__(self, step: str, error: BaseException | str) -> None:
        super().__init__(f"{step}: {error}")
        self.step = step
        self.error = error.strerror or str(error) if isinstance(error, OSError) else str(error)
