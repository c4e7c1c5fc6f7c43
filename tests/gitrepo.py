"""Real git, for the tests that need indexes git itself wrote (a skip naming it without git)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.required import unavailable

__all__ = ["git"]


def git(cwd: Path, *argv: str) -> None:
    """`git ARGV…` in `cwd`, as a throw-away identity; skipped (failed under CI) without git."""
    if shutil.which("git") is None:
        unavailable("needs git (Debian package git) to write real git indexes")
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *argv],
        cwd=cwd, check=True, capture_output=True, timeout=60,
    )  # fmt: skip
