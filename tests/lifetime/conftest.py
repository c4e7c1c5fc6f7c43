"""Fixtures for lifetime tests: real `jigcmd serve` processes on a private state directory.

Locally a test skips with the reason when the machine cannot run envelopes; under `CI` it
fails instead, because CI must prove the lifetime guarantees for real.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import jigcmd
from jigcmd.envelope.cgroups import CgroupBackend
from tests.faults.disk import SmallDisk, mounted
from tests.lifetime.rig import Rig
from tests.required import require_runtime, unavailable, usable_cgroups

_EXAMPLE = Path(jigcmd.__file__).parent / "example"


def machine() -> CgroupBackend:
    """The cgroup backend, when this machine can run envelopes at all (root, cgroups, Bun)."""
    backend = usable_cgroups()
    require_runtime()
    return backend


@pytest.fixture(scope="session")
def binding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private, admitted copy of the bundled example's Binding."""
    root = tmp_path_factory.mktemp("lifetime-example") / "example"
    shutil.copytree(_EXAMPLE, root, ignore=shutil.ignore_patterns("jigcmd.lock", "__pycache__"))
    path = root / "binding.toml"
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--binding", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return path


@pytest.fixture
def rig(binding: Path, tmp_path: Path) -> Iterator[Rig]:
    """Servers on this test's own state directory; whatever they leave is cleaned up after."""
    backend = machine()
    rig = Rig(binding, tmp_path, backend)
    try:
        yield rig
    finally:
        rig.close()


@pytest.fixture
def state_disk(tmp_path: Path) -> Iterator[SmallDisk]:
    """A tmpfs mounted as the rig's state directory (ask for it before `rig`: it outlives it)."""
    with mounted(size="4m") as disk:
        if isinstance(disk, str):
            unavailable(disk)
        (tmp_path / "state").symlink_to(disk.path)
        yield disk
