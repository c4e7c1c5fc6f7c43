"""A /proc mounted with `subset=pid` (systemd's `ProcSubset=pid`) is named, with its fix.

jigcmd reads the boot id and /proc/meminfo there: `run` and `serve` refuse at their start
(UNAVAILABLE, no traceback, not the state directory blamed), and the doctor's `procfs`
line fails naming `subset=pid`. Each runs in its own mount namespace, the host's /proc kept.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.admitted_example import admit_example
from tests.required import require_root, unavailable

pytestmark = pytest.mark.envelope

_SAID = "/proc is mounted with subset=pid (processes only)"
_FIX = "drop ProcSubset=pid"


def _with_pid_subset(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    """`jigcmd ARGS` in a private mount namespace whose /proc shows processes only."""
    mounted = 'mount -t proc -o subset=pid proc /proc || exit 97; exec "$@"'
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", mounted, "sh",
         sys.executable, "-m", "jigcmd", *args],
        input=stdin, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    if done.returncode == 97:
        unavailable(f"this kernel mounts no procfs with subset=pid: {done.stderr.decode()}")
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


@pytest.fixture
def binding(tmp_path: Path) -> Path:
    if shutil.which("unshare") is None:
        unavailable("needs unshare(1)")
    return admit_example(tmp_path)


def test_run_refuses_at_its_start_naming_proc(binding: Path, tmp_path: Path) -> None:
    """`jigcmd run`: UNAVAILABLE naming subset=pid and the fix, exit 3, no traceback."""
    files = binding.parent / "candidates" / "passing"
    done = _with_pid_subset(
        "run", "--binding", str(binding), "--state-dir", str(tmp_path / "state"),
        "tests", "--files", str(files),
    )  # fmt: skip
    assert done.returncode == 3, done
    assert f"UNAVAILABLE: {_SAID}" in done.stderr and _FIX in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    # Even with one slot (no /proc/meminfo read): /proc is named, not the state directory.
    done = _with_pid_subset(
        "run", "--binding", str(binding), "--state-dir", str(tmp_path / "state"),
        "--max-envelopes", "1", "tests", "--files", str(files),
    )  # fmt: skip
    assert f"UNAVAILABLE: {_SAID}" in done.stderr, done.stderr


def test_serve_refuses_each_call_naming_proc(binding: Path, tmp_path: Path) -> None:
    """`jigcmd serve`: the call is answered UNAVAILABLE in the same words."""
    flow = (binding.parent / "requests" / "flow.jsonl").read_bytes()
    done = _with_pid_subset(
        "serve", "--binding", str(binding), "--state-dir", str(tmp_path / "state"), stdin=flow
    )
    assert "Traceback" not in done.stderr, done.stderr
    error = json.loads(done.stdout.splitlines()[-1])["error"]
    assert error["data"]["code"] == "UNAVAILABLE", error
    assert _SAID in error["message"] and _FIX in error["message"], error


def test_the_doctor_fails_its_procfs_line_and_blames_nothing_else(tmp_path: Path) -> None:
    """`jigcmd doctor`: `procfs` FAIL with the fix; no check crashes, the state is not blamed."""
    require_root()
    if shutil.which("unshare") is None:
        unavailable("needs unshare(1)")
    done = _with_pid_subset("doctor", "--json", "--state-dir", str(tmp_path / "state"))
    assert done.returncode == 1, done
    checks = {check["check"]: check for check in json.loads(done.stdout)}
    assert checks["procfs"]["status"] == "FAIL", checks["procfs"]
    assert checks["procfs"]["detail"].startswith(_SAID), checks["procfs"]
    assert _FIX in checks["procfs"]["hint"]
    assert checks["state"]["status"] == "warn", checks["state"]
    assert not [c for c in checks.values() if "the check itself failed" in c["detail"]], checks
