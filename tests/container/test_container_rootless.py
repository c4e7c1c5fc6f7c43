"""jigcmd inside a rootless podman container: with cgroups delegated to the user who runs
podman, the documented options give the complete envelope; without the delegation the doctor
names it and nothing runs.

The container's root is the test user `jigcmdpod` (created here with subordinate ids, and
removed with its podman storage afterwards), so it can write only the cgroups delegated to
that user: on a v1/hybrid host `jigcmd-u<uid>` in every hierarchy (created and removed here),
with podman started inside the unified one, as the README's rootless recipe has it. Its root
is a directory of mount points with the host's /usr and this checkout bound read-only (an
overlay of the host's whole root is refused to an unprivileged user), and jigcmd runs on the
system Python with the checkout's venv on its path.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jigcmd.envelope import cgroups
from jigcmd.frontends.diagnosis.container import recipe
from scripts.v2vm import ROOT
from tests.container.test_container import INSIDE, SECONDS, rlimits
from tests.optional import require_tools
from tests.required import require_root, unavailable
from tests.rootless.rig import delegate, remove_tree, system_python

pytestmark = [pytest.mark.envelope, pytest.mark.slow]

USER = "jigcmdpod"


@dataclass(frozen=True)
class Pod:
    """The rootless podman user and what its containers are started with."""

    user: str
    uid: int
    runtime_dir: Path
    rootfs: Path
    python: str
    # Moves the calling shell into the delegated unified cgroup ("" on v2 or without one).
    prelude: str
    base: str


def _paths() -> list[str]:
    """What the container's Python imports from: the venv's packages and this checkout."""
    return [sysconfig.get_paths()["purelib"], str(ROOT)]


@pytest.fixture(scope="module")
def pod() -> Iterator[Pod]:
    """The user with subordinate ids and a delegated cgroup subtree; all of it removed after."""
    require_root()
    require_tools("podman", "runc", "newuidmap", "newgidmap", "su", what="rootless podman")
    backend = cgroups.detect()
    if backend.mode == "v2":
        unavailable("the rootless container recipe here is the v1/hybrid delegation")
    python = system_python()
    created = False
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", USER], check=True)
        created = True
    entry = pwd.getpwnam(USER)
    made: list[str] = []
    runtime_dir = Path(f"/run/user/{entry.pw_uid}")
    rootfs = Path(tempfile.mkdtemp(prefix="jigcmd-pod-root-"))
    try:
        with open("/etc/subuid", encoding="ascii") as handle:
            if not any(line.startswith(f"{USER}:") for line in handle):
                unavailable(f"useradd gave {USER} no subordinate ids in /etc/subuid")
        runtime_dir.mkdir(parents=True, exist_ok=True)
        os.chown(runtime_dir, entry.pw_uid, entry.pw_gid)
        os.chmod(runtime_dir, 0o700)
        for name in ("usr", "etc", "tmp", "proc", "sys", "dev", "run", "var/tmp", "work"):
            (rootfs / name).mkdir(parents=True, exist_ok=True)
        for name in ("bin", "lib", "lib64", "sbin"):
            (rootfs / name).symlink_to(f"usr/{name}")
        (rootfs / "etc" / "mtab").symlink_to("/proc/self/mounts")
        subprocess.run(["chown", "-R", f"{entry.pw_uid}:{entry.pw_gid}", str(rootfs)], check=True)
        # The envelope builds its root there as a uid of the container other than root (mkdtemp
        # made 0700).
        os.chmod(rootfs, 0o755)
        os.chmod(rootfs / "tmp", 0o1777)
        prelude, _ = delegate(backend, entry.pw_uid, made)
        yield Pod(
            USER,
            entry.pw_uid,
            runtime_dir,
            rootfs,
            python,
            prelude,
            f"jigcmd-u{entry.pw_uid}",
        )
    finally:
        _stop_pause_process(runtime_dir)
        for path in reversed(made):
            remove_tree(path)
        shutil.rmtree(rootfs, ignore_errors=True)
        shutil.rmtree(runtime_dir, ignore_errors=True)
        if created:
            subprocess.run(["userdel", "-r", USER], check=False, capture_output=True)


def _stop_pause_process(runtime_dir: Path) -> None:
    """Rootless podman leaves a pause process holding its namespaces: ours, by its pid file."""
    pid_file = runtime_dir / "libpod" / "tmp" / "pause.pid"
    with contextlib.suppress(OSError, ValueError):
        os.kill(int(pid_file.read_text().strip()), signal.SIGKILL)


def rootless_inside(pod: Pod, *, delegated: bool) -> dict[str, Any]:
    """Every front of jigcmd in a rootless container with the documented options."""
    options = [arg for args in recipe("podman", cgroups.detect().mode).values() for arg in args]
    binds = [arg for path in {"/usr", str(ROOT), *_paths()} for arg in ("-v", f"{path}:{path}:ro")]
    env = ["-e", f"PYTHONPATH={':'.join(_paths())}", "-e", "CI=true"]
    if delegated:
        env += ["-e", f"JIGCMD_CGROUP_BASE={pod.base}"]
    name = f"jigcmd-test-{os.urandom(6).hex()}"
    podman = [
        "podman", "run", "--runtime", "runc", "--rm", "--name", name, "--network", "none",
        *rlimits(), *options, *binds, *env, "--workdir", str(ROOT),
        "--rootfs", str(pod.rootfs), pod.python, str(INSIDE), f"/tmp/{name}",
    ]  # fmt: skip
    command = " ".join(_quote(arg) for arg in podman)
    shell = f"cd /tmp && export XDG_RUNTIME_DIR={pod.runtime_dir} && exec {command}"
    prelude = pod.prelude if delegated else ""
    try:
        done = subprocess.run(
            ["sh", "-c", f"{prelude} exec su {pod.user} -s /bin/sh -c {_quote(shell)}"],
            capture_output=True,
            text=True,
            timeout=SECONDS,
            check=False,
        )
    finally:
        subprocess.run(
            ["su", pod.user, "-s", "/bin/sh", "-c",
             f"XDG_RUNTIME_DIR={pod.runtime_dir} podman rm -f -i {name}"],
            capture_output=True, check=False,
        )  # fmt: skip
    assert done.returncode == 0, f"container exited {done.returncode}: {done.stderr[-3000:]}"
    found: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return found


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def test_a_rootless_container_with_delegated_cgroups_runs_every_front(pod: Pod) -> None:
    """doctor passes (the container complete), run and serve run the candidate."""
    found = rootless_inside(pod, delegated=True)
    checks = found["doctor"]["checks"]
    assert found["doctor"]["status"] == 0, [c for c in checks.values() if not c["ok"]]
    assert checks["container"]["detail"] == "podman container with every piece the envelope needs"
    assert found["run"]["status"] == 0, found["run"]["stderr"]
    assert "result" in found["serve"], found["serve"]
    assert found["ran"]


def test_a_rootless_container_without_delegation_is_diagnosed_and_runs_nothing(pod: Pod) -> None:
    """The container line names the cgroups and the delegation for the user's uid."""
    found = rootless_inside(pod, delegated=False)
    check = found["doctor"]["checks"]["container"]
    assert found["doctor"]["status"] == 1
    assert check["status"] == "FAIL"
    assert f"the container's root is host uid {pod.uid}" in check["detail"]
    assert f"-e JIGCMD_CGROUP_BASE={pod.base}" in check["hint"]
    assert found["run"]["status"] == 3, found["run"]
    assert found["serve"]["error"]["data"]["code"] == "EXECUTION_FAILED", found["serve"]
    assert not found["ran"]
