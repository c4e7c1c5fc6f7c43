"""`jigcmd lock` as a person runs it: the lock's own write failing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import jigcmd

EXAMPLE = Path(jigcmd.__file__).parent / "example"


def test_a_lock_that_cannot_be_written_is_status_2_naming_it_and_nothing_is_left(
    tmp_path: Path,
) -> None:
    """`--lock` into a missing directory: one line naming the file, status 2, no traceback."""
    shutil.copytree(EXAMPLE, tmp_path / "example", ignore=shutil.ignore_patterns("jigcmd.lock"))
    target = tmp_path / "missing" / "x.lock"
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock",
         "--binding", str(tmp_path / "example" / "binding.toml"), "--lock", str(target)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr == (
        f"jigcmd lock: the lock {target} cannot be written: No such file or directory; "
        "nothing was admitted\n"
    )
    assert done.stdout == ""
    assert not (tmp_path / "missing").exists()
