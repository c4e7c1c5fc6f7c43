"""In a container, the doctor's cgroup words name the real cause and a fix that works there.

Driven through `jigcmd doctor` in a private mount namespace made to look like a podman
container (a tmpfs /run holding /run/.containerenv): with a job hierarchy bound read-only, as
a rootful container without the cgroup bind sees it (a remount there is refused as busy); and
as the root of a user namespace whose uid 0 is a host user's, as a rootless container's root
is (the cgroup mount read-write, its directories host root's: EACCES, not EROFS).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.envelope.cgroups.v1 import V1Backend
from tests.required import unavailable, usable_cgroups
from tests.rootless.rig import build_kit, system_python

BIND = "-v /sys/fs/cgroup:/sys/fs/cgroup:rw"
# A host uid no account of this machine uses: the fake rootless container's root.
HOST_UID = 100000 + os.getpid() % 50000

# Runs as root: a child unshares a user and a mount namespace, its parent maps the child's
# uid 0 to HOST_UID, and the child, now that host user, becomes the container's root.
_ROOTLESS = """
import ctypes, os, sys
uid, argv = int(sys.argv[1]), sys.argv[2:]
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
pid = os.fork()
if pid == 0:
    if ctypes.CDLL(None, use_errno=True).unshare(0x10000000 | 0x00020000) != 0:
        os._exit(90)
    os.write(ready_w, b"x")
    os.read(go_r, 1)
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    os.execv(argv[0], argv)  # by path: the interpreter's own files are out of reach now
os.read(ready_r, 1)
for name, text in (("uid_map", f"0 {uid} 1"), ("setgroups", "deny"), ("gid_map", f"0 {uid} 1")):
    with open(f"/proc/{pid}/{name}", "w") as f:
        f.write(text)
os.write(go_w, b"x")
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.fixture(scope="module")
def kit() -> Iterator[Path]:
    """The jigcmd package and its dependencies, world-readable: the host user the fake
    rootless container's root is reaches neither this venv nor a checkout under /root."""
    root = Path(tempfile.mkdtemp(prefix="jigcmd-kit-"))
    os.chmod(root, 0o755)
    try:
        build_kit(root)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _doctor_lines(prelude: str, *, kit: Path | None = None) -> dict[str, str]:
    """The doctor's `container` and `cgroups` lines (with their fix lines), in a fake podman
    container whose mount namespace `prelude` shapes first."""
    backend = usable_cgroups()
    if not isinstance(backend, V1Backend) or "memory" not in backend.hierarchies:
        unavailable("needs a v1 or hybrid host with the memory hierarchy mounted")
    if shutil.which("unshare") is None:
        unavailable("needs unshare(1)")
    script = f'mount -t tmpfs jigcmd-r32F /run && touch /run/.containerenv && {prelude}exec "$@"'
    if kit is not None:
        env = {**os.environ, "PYTHONPATH": str(kit)}
        inner = ["/bin/sh", "-c", script, "sh", system_python(), "-m", "jigcmd.cli", "doctor"]
        argv = [sys.executable, "-c", _ROOTLESS, str(HOST_UID), *inner]
    else:
        env = dict(os.environ)
        cli = [sys.executable, "-m", "jigcmd.cli", "doctor"]
        argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", *cli]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=180, check=False, cwd="/", env=env
    )
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    found = {}
    for index, text in enumerate(lines):
        name = text[6:].split("  ")[0]
        if name in ("container", "cgroups"):
            fix = lines[index + 1].strip() if index + 1 < len(lines) else ""
            found[name] = text
            found[f"{name} fix"] = fix.removeprefix("fix: ") if fix.startswith("fix:") else ""
    if "cgroups" not in found:
        pytest.fail(f"no cgroups line:\n{done.stdout}\n{done.stderr}")
    return found


def test_a_rootful_container_without_the_bind_is_told_the_option_not_a_remount() -> None:
    """A read-only memory hierarchy in a container: `mount -o remount,rw` is refused there
    ("mount point is busy"), so the cgroups line's fix is the engine's bind alone."""
    memory = usable_cgroups()
    assert isinstance(memory, V1Backend)
    found = _doctor_lines(f"mount -o remount,bind,ro {memory.hierarchies['memory']} && ")
    assert found["cgroups"].startswith("FAIL"), found
    assert "remount" not in found["cgroups fix"], found
    assert BIND in found["cgroups fix"], found


def test_a_rootless_containers_root_on_a_writable_mount_is_not_told_it_is_read_only(
    kit: Path,
) -> None:
    """Root of a user namespace that maps host uid N, cgroup mount read-write: EACCES on host
    root's directories. No line calls the mount read-only or asks for the bind already there;
    the fix is the delegation, not the detail again."""
    found = _doctor_lines("", kit=kit)
    for name in ("container", "cgroups"):
        assert found[name].startswith("FAIL"), found
        assert "read-only" not in found[name], found
        assert BIND not in found[f"{name} fix"], found
        assert f"chown -R {HOST_UID}" in found[f"{name} fix"], found
    assert "permission denied" in found["cgroups"], found
    assert found["cgroups fix"] not in found["cgroups"], found
