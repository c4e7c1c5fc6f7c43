"""jarvis on a read-only state directory: refused at start naming the mount, as serve is."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from tests.faults.disk import SmallDisk


def test_jarvis_names_a_read_only_state_mount_not_the_signing_key_it_could_not_make(
    small_disk: SmallDisk, tmp_path: Path
) -> None:
    """ "mounted read-only" and "remount it read-write" (run and serve say so); never only
    "signing key …: cannot be made …: Read-only file system", a side effect of the mount."""
    policy = tmp_path / "jigcmd-policy.toml"
    policy.write_text(
        '[[rule]]\nname = "true"\ndecision = "allow"\nargv0 = ["/bin/true"]\n', encoding="utf-8"
    )
    small_disk.read_only()
    state = ["--state-dir", str(small_disk.path)]
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "jarvis", "--policy", str(policy), "--port", "0", *state],
        env=os.environ | {"JARVIS_BEARER_TOKEN": "jv_" + secrets.token_hex(16)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f"the filesystem holding {small_disk.path} is mounted read-only" in done.stderr
    assert "remount it read-write, or pass another --state-dir" in done.stderr, done.stderr
