"""`jigcmd doctor --cgroup-base`: the base every check judges, as `serve --cgroup-base` uses it
(before it, only `$JIGCMD_CGROUP_BASE` could name one to the doctor)."""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from jigcmd.envelope import cgroups
from tests.admitted_example import jigcmd_cli
from tests.required import require_root, unavailable

ROOT = Path("/sys/fs/cgroup")


@pytest.fixture
def base() -> Iterator[str]:
    """A base name `jigcmd-doctor-…`; whatever the doctor's end-to-end run made of it in any
    hierarchy is removed afterwards."""
    require_root()
    try:
        cgroups.detect()
    except (OSError, ValueError) as exc:
        unavailable(f"no cgroup hierarchy: {exc}")
    name = f"jigcmd-doctor-{uuid.uuid4().hex[:8]}"
    yield name
    for directory in [ROOT / name, *(hierarchy / name for hierarchy in ROOT.iterdir())]:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            directory.rmdir()


def test_the_cgroups_line_and_the_end_to_end_run_use_the_base_given(
    base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cgroups line names the base given on the command line, not the default."""
    monkeypatch.delenv("JIGCMD_CGROUP_BASE", raising=False)
    assert "JIGCMD_CGROUP_BASE" not in os.environ
    done = jigcmd_cli("doctor", "--json", "--cgroup-base", base)
    assert done.returncode in (0, 1), done.stderr
    checks = {check["check"]: check for check in json.loads(done.stdout)}
    assert f"/{base}" in checks["cgroups"]["detail"], checks["cgroups"]
    assert checks["end-to-end"]["ok"], checks["end-to-end"]


def test_a_refused_base_names_the_option_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A base `--cgroup-base` gives that serve would refuse is named as the option, and the
    fix sets the option: the variable the doctor passes it on in is no one's to unset."""
    monkeypatch.delenv("JIGCMD_CGROUP_BASE", raising=False)
    done = jigcmd_cli("doctor", "--json", "--cgroup-base", "jigcmd;x")
    assert done.returncode == 1, done.stderr
    checks = {check["check"]: check for check in json.loads(done.stdout)}
    said = checks["cgroups"]["detail"] + " " + (checks["cgroups"].get("fix") or "")
    assert "'jigcmd;x' (--cgroup-base) contains ';'" in said, checks["cgroups"]
    assert "JIGCMD_CGROUP_BASE" not in said, checks["cgroups"]
