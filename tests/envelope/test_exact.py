"""Exact paths: opened as written, never through a symlink, and a failure that says what changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jigcmd.envelope.exact import open_exact, open_exact_program
from jigcmd.envelope.failure import CWD_CHANGED, PROGRAM_CHANGED, StepError


def test_a_path_without_a_symlink_opens() -> None:
    """A resolved directory opens as an O_PATH descriptor of that very directory."""
    here = Path(os.path.realpath(Path(__file__).parent))
    fd = open_exact(str(here), CWD_CHANGED)
    try:
        assert os.path.samestat(os.fstat(fd), here.stat())
    finally:
        os.close(fd)


@pytest.mark.parametrize("where", ["last", "middle"])
def test_a_symlink_anywhere_in_the_path_is_refused_as_a_change(tmp_path: Path, where: str) -> None:
    """A link as the last component or on the way fails the step with the path named."""
    real = Path(os.path.realpath(tmp_path))
    (real / "target" / "sub").mkdir(parents=True)
    (real / "link").symlink_to(real / "target")
    path = real / "link" if where == "last" else real / "link" / "sub"
    with pytest.raises(StepError) as caught:
        open_exact(str(path), CWD_CHANGED)
    assert (caught.value.step, caught.value.error) == (
        CWD_CHANGED,
        f"{path} has a symlink in it now",
    )


def test_a_path_that_is_gone_is_refused_as_a_change(tmp_path: Path) -> None:
    """A removed path fails the step saying it no longer exists."""
    path = Path(os.path.realpath(tmp_path)) / "gone"
    with pytest.raises(StepError, match="no longer exists") as caught:
        open_exact(str(path), CWD_CHANGED)
    assert caught.value.step == CWD_CHANGED


def test_a_program_must_still_be_a_regular_file(tmp_path: Path) -> None:
    """A directory where the program was is a changed program, not something to exec."""
    path = Path(os.path.realpath(tmp_path)) / "tool"
    path.mkdir()
    with pytest.raises(StepError, match="no longer a regular file") as caught:
        open_exact_program(str(path))
    assert caught.value.step == PROGRAM_CHANGED
