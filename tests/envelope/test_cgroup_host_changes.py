"""Controllers the operator turned off in a parent of the jobs' base (cgroup v2, root).

The doctor is a check: it names what a run would turn on and changes nothing (it enabled
them, then said "all checks passed"). run may enable what its jobs' limits need, and says so.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.admitted_example import admit_example
from tests.required import require_root, require_runtime, unavailable, usable_cgroups
from tests.rootless.rig import remove_tree

pytestmark = [pytest.mark.envelope]

ROOT = Path("/sys/fs/cgroup")


def _cpuset() -> str:
    """ " +cpuset" where the parent offers it: it goes along (jobs get the kernel's CPU pin)."""
    offered = (ROOT / "cgroup.subtree_control").read_text(encoding="ascii").split()
    return " +cpuset" if "cpuset" in offered else ""


@pytest.fixture
def operators_parent() -> Iterator[Path]:
    """A root-owned cgroup whose operator enabled pids and cpu for children, not memory."""
    require_root("the parent is root's, as an operator's is")
    if usable_cgroups().mode != "v2":
        pytest.skip("cgroup.subtree_control is cgroup v2's")
    offered = (ROOT / "cgroup.subtree_control").read_text(encoding="ascii").split()
    if not {"memory", "pids", "cpu"} <= set(offered):
        unavailable(f"the root cgroup enables only {offered} for its children")
    parent = ROOT / f"jigcmd-operator-{secrets.token_hex(4)}"
    parent.mkdir()
    try:
        (parent / "cgroup.subtree_control").write_text("+pids +cpu", encoding="ascii")
        yield parent
    finally:
        remove_tree(str(parent))


def _jigcmd(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "JIGCMD_CGROUP_BASE"}
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _enabled(parent: Path) -> list[str]:
    return sorted((parent / "cgroup.subtree_control").read_text(encoding="ascii").split())


def test_the_doctor_names_what_a_run_would_enable_and_changes_nothing(
    operators_parent: Path, tmp_path: Path
) -> None:
    """memory off in the operator's parent: the cgroups line warns naming +memory there,
    the end-to-end run is not attempted, and the parent's controllers are as they were."""
    base = f"{operators_parent.name}/base"
    done = _jigcmd("doctor", "--cgroup-base", base, cwd=tmp_path)
    assert _enabled(operators_parent) == ["cpu", "pids"], done.stdout
    assert not (operators_parent / "base").exists(), done.stdout
    (line,) = [text for text in done.stdout.splitlines() if text[6:].startswith("cgroups ")]
    assert line.startswith("warn  cgroups"), done.stdout
    assert f"+memory{_cpuset()} in {operators_parent}/cgroup.subtree_control" in line, line
    assert "warn  end-to-end         not attempted" in done.stdout, done.stdout
    assert "all" not in done.stdout.splitlines()[-1], done.stdout


def test_a_run_that_enables_a_controller_says_so(operators_parent: Path, tmp_path: Path) -> None:
    """The run may turn memory on for its jobs' limits, and its stderr names what and where."""
    require_runtime()
    binding = admit_example(tmp_path)
    candidate = binding.parent / "candidates" / "passing"
    done = _jigcmd(
        "run", "--binding", str(binding), "--state-dir", str(tmp_path / "state"),
        "--cgroup-base", f"{operators_parent.name}/base", "tests", "--files", str(candidate),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "memory" in _enabled(operators_parent)
    assert "jigcmd enables them as it makes its first job" in done.stderr, done.stderr
    said = f"+memory{_cpuset()} in {operators_parent}/cgroup.subtree_control"
    assert said in done.stderr, done.stderr
