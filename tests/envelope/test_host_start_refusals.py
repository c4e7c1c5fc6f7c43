"""Root on a host that can make no envelope: every front refuses at start, naming the cause.

A `user.max_<kind>_namespaces` of 0 (root's clone3 fails with ENOSPC) or a read-only cgroup2
mount: serve, run and jarvis stopped before serving calls that each failed with a raw errno,
and the doctor blamed a kernel option. Kernel sysctls are changed in the cgroup v2 VM only.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.admitted_example import admit_example
from tests.required import require_root, unavailable, usable_cgroups

pytestmark = [pytest.mark.envelope]


@pytest.fixture(autouse=True)
def in_the_vm() -> None:
    if os.environ.get("JIGCMD_IN_V2VM") != "1":
        # A kernel setting, a cgroup mount: the whole machine's, never changed on a host.
        pytest.skip("changes the machine: only inside the cgroup v2 VM (tests/v2vm)")
    require_root("root's fronts are the ones judged here")


def _fronts(
    tmp_path: Path, wrap: tuple[str, ...] = (), verbs: tuple[str, ...] = ("serve", "run", "jarvis")
) -> dict[str, subprocess.CompletedProcess[str]]:
    """serve, run and jarvis as root, each started once (under `wrap`, a command prefix)."""
    binding = admit_example(tmp_path)
    policy = tmp_path / "jigcmd-policy.toml"
    policy.write_text(
        '[[rule]]\nname = "true"\ndecision = "allow"\nargv0 = ["/bin/true"]\n', encoding="utf-8"
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    state = ["--state-dir", str(tmp_path / "state")]
    candidate = str(binding.parent / "candidates" / "passing")
    argvs = {
        "serve": ["serve", "--binding", str(binding), *state],
        "run": ["run", "--binding", str(binding), *state, "tests", "--files", candidate],
        "jarvis": ["jarvis", "--policy", str(policy), "--port", str(port), *state],
    }
    environ = os.environ | {"JARVIS_BEARER_TOKEN": "jv_" + secrets.token_hex(16)}
    return {
        verb: subprocess.run(
            [*wrap, sys.executable, "-m", "jigcmd", *argv],
            input="",
            capture_output=True,
            text=True,
            timeout=120,
            env=environ,
            check=False,
        )
        for verb, argv in argvs.items()
        if verb in verbs
    }


def _doctor(wrap: tuple[str, ...] = ()) -> str:
    done = subprocess.run(
        [*wrap, sys.executable, "-m", "jigcmd", "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.stdout


def _refused(fronts: dict[str, subprocess.CompletedProcess[str]], *words: str) -> None:
    for verb, done in fronts.items():
        said = done.stdout + done.stderr
        assert done.returncode in (2, 3), (verb, said)
        assert "Traceback" not in said and "EXECUTION_FAILED" not in said, (verb, said)
        assert "no envelope can be made here" in said, (verb, said)
        for word in words:
            assert word in said, (verb, word, said)


@pytest.fixture(params=["user", "mnt", "net"])
def zero_limit(request: pytest.FixtureRequest) -> Iterator[str]:
    """One `user.max_<kind>_namespaces` set to 0; restored after."""
    path = Path(f"/proc/sys/user/max_{request.param}_namespaces")
    if not path.exists():
        unavailable(f"this kernel has no {path}")
    before = path.read_text(encoding="ascii")
    path.write_text("0\n", encoding="ascii")
    try:
        yield f"user.max_{request.param}_namespaces"
    finally:
        path.write_text(before, encoding="ascii")


def test_a_zero_namespace_limit_is_refused_at_start_naming_the_sysctl(
    tmp_path: Path, zero_limit: str
) -> None:
    """Every front stops at start with the sysctl and its fix; the doctor's failing line
    names it too, never CONFIG_*_NS (which the kernel has)."""
    fix = f"sysctl -w {zero_limit}=15000"
    _refused(_fronts(tmp_path), f"{zero_limit} = 0", fix)
    report = _doctor()
    failed = [line for line in report.splitlines() if line.startswith("FAIL")]
    assert any(f"{zero_limit} = 0" in line for line in failed), report
    assert fix in report and "CONFIG_" not in report, report


def test_a_read_only_cgroup2_mount_is_refused_at_start_with_its_fix(tmp_path: Path) -> None:
    """cgroup2 bound read-only: every front stops at start naming the mount; the doctor's
    cgroups fix line is the remount, not the problem's words again."""
    if usable_cgroups().mode != "v2":
        pytest.skip("the VM's cgroup2 mount")
    wrap = ("unshare", "-m", "--propagation", "private", "sh", "-c")
    remount = 'mount -o remount,bind,ro /sys/fs/cgroup && exec "$@"'
    prefix = (*wrap, remount, "sh")
    reason = "the cgroup mount holding /sys/fs/cgroup is read-only"
    _refused(_fronts(tmp_path, prefix), reason, "mount -o remount,rw /sys/fs/cgroup")
    lines = _doctor(prefix).splitlines()
    (at,) = [i for i, text in enumerate(lines) if text[6:].startswith("cgroups ")]
    assert lines[at].startswith("FAIL  cgroups") and reason in lines[at], lines
    assert "mount -o remount,rw /sys/fs/cgroup" in lines[at + 1], lines


def test_a_zygote_that_cannot_start_says_the_step_not_a_python_class(tmp_path: Path) -> None:
    """Root without CAP_SYS_ADMIN (not a container): run fails closed naming the staging
    step and the kernel's words, never "StagingError: [Errno 1]" or "OSError: cgroups:"."""
    without = ("setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin")
    done = _fronts(tmp_path, without, ("run",))["run"]
    said = done.stdout + done.stderr
    assert done.returncode == 3, said
    assert "Operation not permitted" in said, said
    for leak in ("StagingError", "PrivilegeError", "OSError", "[Errno"):
        assert leak not in said, (leak, said)
