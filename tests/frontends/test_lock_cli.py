"""`jigcmd lock` as a person runs it: the lock's own write failing, and a review whose
command lines are the ones that run."""

from __future__ import annotations

import json
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


@pytest.mark.parametrize(
    ("entry", "rule"),
    [
        ('cli = { run = "src/cli.json" }', "must be a .ts or .js file (docs/binding.md)"),
        (
            't = { test = ["a.test.tsx"] }',
            ".test.ts, .test.js, .spec.ts or .spec.js (docs/binding.md)",
        ),
    ],
)
def test_a_refused_path_cites_the_document_users_have(
    tmp_path: Path, entry: str, rule: str
) -> None:
    """The rule is cited from docs/binding.md, never from the design notes users lack."""
    shutil.copytree(EXAMPLE, tmp_path / "example", ignore=shutil.ignore_patterns("jigcmd.lock"))
    binding = tmp_path / "example" / "binding.toml"
    binding.write_text(binding.read_text().split("[commands]")[0] + f"[commands]\n{entry}\n")
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--binding", str(binding)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert rule in done.stderr
    assert "spec-notes" not in done.stderr + done.stdout


@pytest.mark.envelope
def test_the_reviewed_test_command_is_what_run_runs_reporter_and_all(tmp_path: Path) -> None:
    """The review's line is the argv `jigcmd run` says it ran, Bun's JUnit reporter included
    (every front's test command has it: the signed test result is read from its report)."""
    require_root()
    shutil.copytree(EXAMPLE, tmp_path / "example", ignore=shutil.ignore_patterns("jigcmd.lock"))
    binding = str(tmp_path / "example" / "binding.toml")
    locked = subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--binding", binding],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    (reviewed,) = [line for line in locked.stdout.splitlines() if line.startswith("  tests ")]
    reporter = "--reporter=junit --reporter-outfile=/tmp/jigcmd-junit.xml"
    assert reporter in reviewed and "[" not in reviewed
    argv = reviewed.split("  test  ", 1)[1].removesuffix("   (no arguments accepted)")
    ran = subprocess.run(
        [sys.executable, "-m", "jigcmd", "run", "--binding", binding,
         "--state-dir", str(tmp_path / "state"), "tests",
         "--files", str(tmp_path / "example" / "candidates" / "passing")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    command = next(line for line in ran.stdout.splitlines() if line.startswith("command:"))
    assert command == "command:    tests: " + argv


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


@pytest.mark.envelope
def test_an_altered_lock_is_named_once_with_one_way_to_re_admit(tmp_path: Path) -> None:
    """A lock edited by hand: the serve answer and `lock --check` say so once, advise once."""
    require_root()
    shutil.copytree(EXAMPLE, tmp_path / "example", ignore=shutil.ignore_patterns("jigcmd.lock"))
    binding = tmp_path / "example" / "binding.toml"
    lock = tmp_path / "example" / "jigcmd.lock"
    subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--binding", str(binding)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    data = json.loads(lock.read_text())
    data["policy"]["commands"]["tests"]["test"] = ["test/other.test.ts"]
    lock.write_text(json.dumps(data))
    call = {"jsonrpc": "2.0", "id": "c1", "method": "capability/call", "params": {
        "operationId": "op-1", "slot": "command", "method": "run",
        "input": {"command": "tests", "files": {"test/project.test.ts": "x"}}}}  # fmt: skip
    served = subprocess.run(
        [sys.executable, "-m", "jigcmd", "serve", "--binding", str(binding),
         "--state-dir", str(tmp_path / "state")],
        input=json.dumps(call) + "\n", capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    message = json.loads(served.stdout)["error"]["message"]
    assert message.startswith(
        "command 'tests': lock <binding dir>/jigcmd.lock is unusable: bindingDigest sha256:"
    )
    assert message.endswith(
        ": the lock was altered; run `jigcmd lock --binding <binding dir>/binding.toml` to re-admit"
    )
    assert message.count("re-admit") == 1 and message.count("jigcmd.lock") == 1
    checked = subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--check", "--binding", str(binding)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert checked.returncode == 1
    assert checked.stderr.startswith(f"jigcmd lock: {lock}: bindingDigest sha256:")
    assert checked.stderr.endswith(
        f": the lock was altered; run `jigcmd lock --binding {binding}` to re-admit\n"
    )
    assert checked.stderr.count("re-admit") == 1
