"""`jigcmd doctor` run in a private mount namespace that a shell script set up first.

The conditions the doctor must judge (a read-only /tmp, a lease directory of the wrong
mode, a container's /run) are made with mounts only that namespace sees: `unshare --mount`
makes its mounts private, so the host's /run/jigcmd and /tmp are never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.required import unavailable

__all__ = ["doctor_after"]


def doctor_after(
    setup: str, *argv: str, home: Path, cwd: str = "/"
) -> subprocess.CompletedProcess[str]:
    """`jigcmd doctor argv` as root, once `setup` (sh, `set -e`) ran in its mount namespace."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        unavailable("needs root and unshare(1): the condition is made with private mounts")
    env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / "xdg")}
    for name in ("JIGCMD_STATE_DIR", "TMPDIR", "TEMP", "TMP"):
        env.pop(name, None)
    # The checkout, not the working directory a test may move away from.
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    script = f'set -e\n{setup}\ncd {cwd}\nexec "$0" -m jigcmd doctor "$@"'
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
         sys.executable, *argv],
        capture_output=True, text=True, timeout=300, check=False, env=env,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
