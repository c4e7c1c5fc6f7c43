"""`jigcmd run` as root without a capability the envelope needs: the refusal names the step
that failed for want of it, as the doctor's lines do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.admitted_example import admit_example
from tests.required import require_root, require_runtime, unavailable, usable_cgroups

pytestmark = pytest.mark.envelope


def test_without_cap_setgid_the_refusal_names_dropping_the_groups(tmp_path: Path) -> None:
    """The zygote's setgroups([]) fails, not the network namespace: that step is named."""
    require_root("dropping CAP_SETGID from root's bounding set")
    usable_cgroups()
    require_runtime()
    if shutil.which("setpriv") is None:
        unavailable("setpriv (util-linux) is missing")
    binding = admit_example(tmp_path)
    candidate = binding.parent / "candidates" / "passing"
    jigcmd = [sys.executable, "-m", "jigcmd", "run", "--binding", str(binding)]
    where = ["--state-dir", str(tmp_path / "state"), "tests", "--files", str(candidate)]
    done = subprocess.run(
        ["setpriv", "--bounding-set=-setgid", *jigcmd, *where],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "JIGCMD_CGROUP_BASE"},
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "nothing ran: drop supplementary groups: Operation not permitted" in done.stderr
    assert "network namespace" not in done.stderr, done.stderr
