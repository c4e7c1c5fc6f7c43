"""Without the optional tools (podman, runc, qemu, busybox) the suites that need them skip
with the Debian package to install, teardowns included, and under `CI` the same run fails.

Each case runs pytest over those suites in a child whose PATH holds none of the tools.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITES = ("tests/container", "tests/v2vm", "tests/largehost")
# What every Debian system has (the VM also needs these, and the rootless podman test su).
BASE_TOOLS = ("apt-get", "apt-cache", "dpkg-deb", "su", "setpriv", "useradd", "userdel", "sh")


def pytest_without_tools(tmp_path: Path, *, ci: bool) -> subprocess.CompletedProcess[str]:
    """pytest over SUITES with a PATH of the base system's tools alone (no optional one)."""
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in BASE_TOOLS:
        found = shutil.which(tool)
        if found:
            (bare / tool).symlink_to(found)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PATH"] = str(bare)
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rsfE",
         f"--basetemp={tmp_path / 'base'}", *SUITES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_every_missing_tool_is_a_skip_naming_its_package(tmp_path: Path) -> None:
    """rc 0, no error (no teardown runs a missing podman), each skip names what to install."""
    done = pytest_without_tools(tmp_path, ci=False)
    out = done.stdout
    assert done.returncode == 0, out[-4000:]
    assert " error" not in out and "FileNotFoundError" not in out, out[-4000:]
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert skips, out[-4000:]
    if os.geteuid() == 0:
        assert any("apt-get install" in s and "podman" in s for s in skips), skips
        assert any("runc" in s for s in skips) or "v2" in out, skips
    assert any("qemu-system-x86 busybox-static" in s for s in skips), skips


@pytest.mark.slow
def test_under_ci_every_missing_tool_is_a_failure(tmp_path: Path) -> None:
    """The same run under CI=true fails, each failure naming the package, still no error."""
    done = pytest_without_tools(tmp_path, ci=True)
    out = done.stdout
    assert done.returncode == 1, out[-4000:]
    assert "FileNotFoundError" not in out, out[-4000:]
    failed = [line for line in out.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert failed, out[-4000:]
    assert all("required under CI but unavailable" in line for line in failed), failed
    assert any("qemu-system-x86 busybox-static" in line for line in failed), failed
    if os.geteuid() == 0:
        assert any("apt-get install" in line and "podman" in line for line in failed), failed
