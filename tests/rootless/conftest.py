"""The rootless suite's fixture: the test user with a delegated cgroup subtree (`rig.py`)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.envelope import cgroups
from tests.required import unavailable
from tests.rootless.rig import (
    UNDELEGATED_USER,
    USER,
    Rootless,
    build_kit,
    delegate,
    ensure_user,
    remove_tree,
    system_python,
)


@pytest.fixture(scope="session")
def rootless() -> Iterator[Rootless]:
    """The test user with a delegated cgroup subtree on this machine's cgroup layout."""
    if os.geteuid() != 0:
        unavailable("setting up a delegated test user needs root")
    python = system_python()
    if shutil.which("setpriv") is None:
        unavailable("setpriv (util-linux) is missing")
    created: list[str] = []
    user = ensure_user(USER, created)
    ensure_user(UNDELEGATED_USER, created)
    kit = Path(tempfile.mkdtemp(prefix="jigcmd-kit-"))
    os.chmod(kit, 0o755)
    made: list[str] = []
    try:
        build_kit(kit)
        backend = cgroups.detect()
        prelude, base = delegate(backend, user.pw_uid, made)
        yield Rootless(
            uid=user.pw_uid,
            gid=user.pw_gid,
            home=Path(user.pw_dir),
            python=python,
            kit=kit,
            prelude=prelude,
            cgroup_base=base,
        )
    finally:
        try:
            for path in reversed(made):
                remove_tree(path)
        finally:
            shutil.rmtree(kit, ignore_errors=True)
            for name in created:
                subprocess.run(["userdel", "-r", name], check=False, capture_output=True)


EXAMPLE = Path(__file__).resolve().parents[2] / "jigcmd" / "example"


@pytest.fixture
def example(rootless: Rootless) -> Iterator[Path]:
    """The bundled example, admitted, in a directory the test user can read."""
    where = Path(shutil.copytree(EXAMPLE, Path("/tmp") / f"jigcmd-rootless-{secrets.token_hex(4)}"))
    subprocess.run(["chmod", "-R", "a+rX", str(where)], check=True)
    locked = rootless.run("lock", "--binding", str(where / "binding.toml"), user="root")
    assert locked.returncode == 0, locked.stderr
    subprocess.run(["chmod", "a+r", str(where / "jigcmd.lock")], check=True)
    yield where
    shutil.rmtree(where, ignore_errors=True)
