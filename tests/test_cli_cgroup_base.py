"""An operator's cgroup base through the real command line: `$JIGCMD_CGROUP_BASE` is
`--cgroup-base`, and a base that cannot be one on this host is refused at start, naming
where it came from, never replaced by the default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.envelope import cgroups
from tests.admitted_example import admit_example
from tests.required import unavailable


def _not_a_base() -> str:
    """A value that cannot be a base on this host (the tester's, on a hybrid one)."""
    try:
        mode = cgroups.detect().mode
    except (OSError, ValueError) as exc:
        unavailable(f"no cgroup hierarchy to name a base in: {exc}")
    # v1 and hybrid: one absolute path names one hierarchy; v2: outside the cgroup2 mount.
    return "/tmp/jigcmd-not-a-cgroup" if mode == "v2" else "/sys/fs/cgroup/unified/jigcmd-u1001"


@pytest.mark.parametrize("given", ["$JIGCMD_CGROUP_BASE", "--cgroup-base"])
def test_a_base_that_cannot_be_one_is_refused_by_run_and_serve_at_start(
    tmp_path: Path, given: str
) -> None:
    """Both fronts exit before anything runs, with the reason and the source named."""
    binding = admit_example(tmp_path)
    bad = _not_a_base()
    environ = {k: v for k, v in os.environ.items() if k != "JIGCMD_CGROUP_BASE"}
    option: list[str] = ["--cgroup-base", bad]
    if given == "$JIGCMD_CGROUP_BASE":
        environ["JIGCMD_CGROUP_BASE"], option = bad, []
    common = ["--binding", str(binding), "--state-dir", str(tmp_path / "state"), *option]
    candidate = binding.parent / "candidates" / "passing"
    for argv in (["run", *common, "tests", "--files", str(candidate)], ["serve", *common]):
        done = subprocess.run(
            [sys.executable, "-m", "jigcmd", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            env=environ,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert done.returncode in (2, 3), done.stdout + done.stderr
        assert f": the cgroup base {bad!r} ({given}) is " in done.stderr, done.stderr
        assert "ended:" not in done.stdout
