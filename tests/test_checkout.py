"""The checkout holds nothing that points outside it: no tracked symlink dangles."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_no_tracked_symlink_dangles_or_leaves_the_checkout() -> None:
    """A symlink into one developer's machine (a `.venv-layout`) means nothing anywhere else."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-s"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    links = [line.split("\t", 1)[1] for line in listed.stdout.splitlines() if line[:6] == "120000"]
    bad = []
    for name in links:
        path = REPO / name
        target = path.resolve()
        if not target.exists() or not target.is_relative_to(REPO):
            bad.append(f"{name} -> {path.readlink()}")
    assert bad == []
