"""Run a Python script in a fresh user namespace mapped 0 → host 65534, like the envelope."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jigcmd
from tests.required import unavailable

REPO = Path(jigcmd.__file__).resolve().parent.parent


def run_mapped(script: str) -> tuple[int, str, str]:
    """Run `script`, which prints "unshared" after unshare(CLONE_NEWUSER) and then reads a line.

    The parent writes the id maps once the child has unshared, then sends "mapped". A script
    that prints "unavailable…" instead makes the test skip (locally) or fail (under CI).
    Returns (exit status, stdout, stderr).
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PYTHONPATH": str(REPO)},
        cwd="/",
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        if first.startswith(b"unavailable"):
            proc.wait()
            unavailable(first.decode().strip())
        assert first == b"unshared\n", proc.communicate(timeout=60)[1].decode()
        for name in ("uid_map", "gid_map"):
            Path(f"/proc/{proc.pid}/{name}").write_text("0 65534 1\n")
        out, err = proc.communicate(b"mapped\n", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
