"""`jigcmd lock` as a person runs it: the lock's own write failing, and a review whose
command lines are the ones that run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import jigcmd
from tests.required import require_root

EXAMPLE = Path(jigcmd.__file__).parent / "example"


def test_a_lock_that_cannot_be_written_is_status_2_naming_it_and_nothing_is_left(
    tmp_path: Path,
) -> None:
    """`--lock` into a missing directory: one line naming the file, status 2, no traceback."""
    shutil.copytree(EXAMPLE, tmp_path / "example", ignore=shutil.ignore_patterns("jigcmd.lock"))
    target = tmp_path / "missing" / "x.lock"
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock",
         "--binding", str(tmp_path / "example" / "binding.toml"), "--lock", str(target)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr == (
        f"jigcmd lock: the lock {target} cannot be written: No such file or directory; "
        "nothing was admitted\n"
    )
    assert done.stdout == ""
    assert not (tmp_path / "missing").exists()


@pytest.mark.envelope
def test_the_reviewed_test_command_is_what_run_runs_its_reporter_marked(tmp_path: Path) -> None:
    """The review brackets the JUnit reporter (MCP and `run` only); unbracketed, its line is
    the argv `jigcmd run` says it ran."""
    require_root()
    shutil.copytree(EXAMPLE, tmp_path / "example", ignore=shutil.ignore_patterns("jigcmd.lock"))
    binding = str(tmp_path / "example" / "binding.toml")
    locked = subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--binding", binding],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    (reviewed,) = [line for line in locked.stdout.splitlines() if line.startswith("  tests ")]
    reporter = "--reporter=junit --reporter-outfile=/tmp/jigcmd-junit.xml"
    assert f"[{reporter}]" in reviewed
    argv = reviewed.split("  test  ", 1)[1].removesuffix("   (no arguments accepted)")
    ran = subprocess.run(
        [sys.executable, "-m", "jigcmd", "run", "--binding", binding,
         "--state-dir", str(tmp_path / "state"), "tests",
         "--files", str(tmp_path / "example" / "candidates" / "passing")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    command = next(line for line in ran.stdout.splitlines() if line.startswith("command:"))
    assert command == "command:    tests: " + argv.replace("[", "").replace("]", "")


def _lock(binding: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--binding", str(binding)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_binding_naming_a_directory_says_it_names_the_file_and_the_one_inside(
    tmp_path: Path,
) -> None:
    """`--binding p6` for `p6/.jig/binding.toml`: the option and the file, not `Is a directory`."""
    project = tmp_path / "p6"
    (project / "src").mkdir(parents=True)
    (project / "src" / "a.test.ts").write_text('import "bun:test";\n')
    subprocess.run([sys.executable, "-m", "jigcmd", "init", str(project)], check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    done = _lock(project)
    assert done.returncode == 2
    assert done.stderr == (
        f"jigcmd lock: {project}: a directory: --binding names the Binding's file, e.g. "
        f"{project}/.jig/binding.toml\n"
    )
    done = _lock(project / "src")
    assert done.stderr == (
        f"jigcmd lock: {project}/src: a directory: --binding names the Binding's file\n"
    )


def test_a_hand_written_binding_whose_package_is_missing_points_at_writing_one(
    tmp_path: Path,
) -> None:
    binding = tmp_path / "binding.toml"
    binding.write_text('package = "flows/app"\n[commands.tests]\ntest = ["a.test.ts"]\n')
    done = _lock(binding)
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"jigcmd lock: {binding}: /package: package directory '{tmp_path}/flows/app' does not "
        "exist (`package` is the Flow package's directory, relative to the Binding, holding "
        "FLOW.md and the contract's descriptor copy: docs/binding.md#writing-one-by-hand)"
    )
