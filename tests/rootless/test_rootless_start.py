"""Every front refuses at start, naming the cause and its fix, what would fail every call.

No user namespaces for the user: serve, run and jarvis stop before anything starts (never
serving calls that each fail), with the doctor's words.
"""

from __future__ import annotations

import secrets
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.rootless.rig import USER, Rootless

pytestmark = [pytest.mark.envelope, pytest.mark.slow]


@pytest.fixture
def policy() -> Iterator[Path]:
    """A jarvis policy the test user can read."""
    path = Path("/tmp") / f"jigcmd-rootless-policy-{secrets.token_hex(4)}.toml"
    path.write_text(
        '[[rule]]\nname = "true"\ndecision = "allow"\nargv0 = ["/bin/true"]\n', encoding="utf-8"
    )
    path.chmod(0o644)
    yield path
    path.unlink()


def _fronts(
    rootless: Rootless, example: Path, policy: Path, user: str = USER
) -> dict[str, subprocess.CompletedProcess[str]]:
    """serve (a Run/1 peer that sent nothing yet), run and jarvis, each started once."""
    binding = str(example / "binding.toml")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = {"JARVIS_BEARER_TOKEN": "jv_" + secrets.token_hex(16)}
    return {
        "serve": rootless.run("serve", "--binding", binding, input="", user=user),
        "run": rootless.run(
            "run",
            "--binding",
            binding,
            "tests",
            "--files",
            str(example / "candidates" / "passing"),
            user=user,
        ),
        "jarvis": rootless.run(
            "jarvis",
            "--policy",
            str(policy),
            "--port",
            str(port),
            env=token,
            timeout=60,
            user=user,
        ),
    }


_USERNS_SYSCTLS = {
    "kernel/unprivileged_userns_clone": (
        "kernel.unprivileged_userns_clone = 0 (Debian) forbids them to non-root",
        "sysctl -w kernel.unprivileged_userns_clone=1",
    ),
    "user/max_user_namespaces": (
        "user.max_user_namespaces = 0 allows no user namespace at all",
        "sysctl -w user.max_user_namespaces=15000",
    ),
}


@pytest.fixture(params=sorted(_USERNS_SYSCTLS))
def no_userns(request: pytest.FixtureRequest, example: Path) -> Iterator[tuple[str, str]]:
    """A sysctl set to 0 that refuses the user namespaces (the VM's only); restored after."""
    path = Path("/proc/sys") / request.param
    if not path.exists():
        pytest.skip(f"this kernel has no {path}")
    before = path.read_text(encoding="ascii")
    path.write_text("0\n", encoding="ascii")
    try:
        yield _USERNS_SYSCTLS[request.param]
    finally:
        path.write_text(before, encoding="ascii")


def test_without_user_namespaces_every_front_refuses_at_start_with_the_doctors_words(
    rootless: Rootless, example: Path, policy: Path, no_userns: tuple[str, str]
) -> None:
    """The sysctl and its fix, as `jigcmd doctor` words them, from serve, run and jarvis,
    each stopping at start; never "unshare: Operation not permitted" at every call."""
    why, fix = no_userns
    for verb, done in _fronts(rootless, example, policy).items():
        said = done.stdout + done.stderr
        assert done.returncode in (2, 3), (verb, said)
        assert "EXECUTION_FAILED" not in said, (verb, said)
        assert "running without root needs user namespaces" in said, (verb, said)
        assert why in said and fix in said, (verb, said)
        assert "EXECUTION_FAILED" not in said, (verb, said)
    doctor = rootless.run("doctor")
    assert "FAIL  user namespaces" in doctor.stdout and why in doctor.stdout, doctor.stdout
