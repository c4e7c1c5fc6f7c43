"""The doctor's `jarvis policy` line, as a test reads it from the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def jarvis_policy_check(tmp_path: Path, policy: Path) -> dict[str, Any]:
    """`jigcmd doctor --json --jarvis-policy policy`'s `jarvis policy` line, the doctor failing."""
    done = subprocess.run(
        [
            sys.executable, "-m", "jigcmd", "doctor", "--json", "--state-dir",
            str(tmp_path / "state"), "--jarvis-policy", str(policy),
        ],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout
    check: dict[str, Any] = {c["check"]: c for c in json.loads(done.stdout)}["jarvis policy"]
    return check
