"""`jigcmd lock --cgroup-base`: a TypeScript Binding is evaluated under the base given.

Before the option, `lock` evaluated a script Binding in an envelope under the default base
(`jigcmd`) unless `$JIGCMD_CGROUP_BASE` was set: an operator whose serve runs under
`--cgroup-base B` could not say B to lock. The option is serve's, refused as serve refuses it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.envelope.cgroups import CgroupBackend
from tests.envelope.test_script_binding import binding_ts, reference_project

pytestmark = pytest.mark.envelope

ROOT = Path("/sys/fs/cgroup")


def _lock(*args: str) -> subprocess.CompletedProcess[str]:
    """`jigcmd lock` with `$JIGCMD_CGROUP_BASE` unset: only the option can name a base."""
    env = {key: value for key, value in os.environ.items() if key != "JIGCMD_CGROUP_BASE"}
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def _directories(base: str) -> list[Path]:
    """Where `base` is, in the unified hierarchy or in each v1 one."""
    return [ROOT / base, *(hierarchy / base for hierarchy in ROOT.iterdir())]


@pytest.fixture
def base(real_cgroups: CgroupBackend) -> Iterator[str]:
    """A base `jigcmd-lock-…`, removed afterwards wherever the evaluation made it."""
    name = f"jigcmd-lock-{uuid.uuid4().hex[:8]}"
    yield name
    for directory in _directories(name):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError, OSError):
            directory.rmdir()


def test_a_ts_binding_is_evaluated_under_the_base_given(base: str, tmp_path: Path) -> None:
    """The lock is written, and the envelope that evaluated the Binding used `base`."""
    path = reference_project(tmp_path / "project", binding_ts())
    assert not any(directory.is_dir() for directory in _directories(base))
    done = _lock("--binding", str(path), "--cgroup-base", base)
    assert done.returncode == 0, done.stderr
    assert (path.parent / "command.jigcmd.lock").is_file()
    assert any(directory.is_dir() for directory in _directories(base))


def test_a_base_serve_would_refuse_is_refused_before_anything_is_evaluated(
    tmp_path: Path,
) -> None:
    """Named as the option, status 2, no lock written (a TOML Binding too: never ignored)."""
    path = reference_project(tmp_path / "project", binding_ts())
    done = _lock("--binding", str(path), "--cgroup-base", "jigcmd;x")
    assert done.returncode == 2
    assert "'jigcmd;x' (--cgroup-base) contains ';'" in done.stderr
    assert not (path.parent / "command.jigcmd.lock").exists()
