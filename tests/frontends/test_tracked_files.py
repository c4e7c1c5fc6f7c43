"""A file git tracks is part of the candidate whatever `.gitignore` says, as in git; and
`--exclude '!PATH'` brings back a file `.gitignore` left out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gitrepo import git
from tests.required import require_root


def jigcmd(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *argv],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture
def committed(tmp_path: Path) -> Path:
    """The tester's repository: `.gitignore` lists x.ts, which is committed (`add -f`)."""
    root = tmp_path / "gi"
    (root / "test").mkdir(parents=True)
    (root / ".gitignore").write_text("x.ts\nnotes.ts\n")
    (root / "x.ts").write_text("export const x = 1\n")
    (root / "notes.ts").write_text("export const notes = 2\n")
    (root / "test" / "x.test.ts").write_text(
        'import {x} from "../x.ts";\nimport {test,expect} from "bun:test";\n'
        'test("x",()=>expect(x).toBe(1));\n'
    )
    git(root, "init", "-q")
    git(root, "add", "-f", ".gitignore", "x.ts", "test")
    git(root, "commit", "-q", "-m", "i")
    return root


def test_init_keeps_a_tracked_file_and_says_how_to_bring_back_an_ignored_one(
    committed: Path,
) -> None:
    """x.ts (tracked) is not left out; notes.ts (untracked) is, with the --exclude to send it."""
    done = jigcmd("init", str(committed))
    assert done.returncode == 0, done.stderr
    (note,) = [line for line in done.stderr.splitlines() if "left out" in line]
    assert "x.ts" not in note.replace("notes.ts", "")
    assert "notes.ts (.gitignore; bring one back with --exclude '!/notes.ts')" in note


@pytest.mark.envelope
def test_a_committed_file_gitignore_lists_is_sent_and_the_tests_pass(committed: Path) -> None:
    """The tester's repro: init, lock, run; before, x.ts was left out and the import failed."""
    require_root()
    state = committed.parent / "state"
    assert jigcmd("init", str(committed)).returncode == 0
    binding = str(committed / ".jig" / "binding.toml")
    locked = jigcmd("lock", "--binding", binding)
    assert locked.returncode == 0, locked.stderr
    argv = ("run", "--binding", binding, "--state-dir", str(state), "tests", "--files")
    done = jigcmd(*argv, str(committed), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["evidence"]["exitCode"] == 0, done.stdout
    # An untracked file .gitignore lists comes back with a negated --exclude.
    (committed / "x.ts").write_text('export { notes as x } from "./notes.ts";\n')
    back = jigcmd(*argv, str(committed), "--json", "--exclude", "!/notes.ts")
    assert back.returncode == 0, back.stderr
    evidence = json.loads(back.stdout)["evidence"]
    assert evidence["exitCode"] == 1, back.stdout
    assert (
        "Expected: 1" in evidence["stderr"]["text"] and "Received: 2" in evidence["stderr"]["text"]
    )


def sent(root: Path, *extra: str) -> tuple[set[str], str]:
    """The files `jigcmd request` puts in the request for `root`, and its stderr."""
    done = jigcmd("request", "tests", "--files", str(root), *extra)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout)["params"]["input"]["files"]), done.stderr


def test_below_an_ignored_directory_only_the_tracked_files_are_sent(committed: Path) -> None:
    """As git: dist/ is ignored, its committed file is not; its own .gitignore is not read."""
    dist = committed / "dist"
    (dist / "sub").mkdir(parents=True)
    (dist / "kept.js").write_text("1\n")
    (dist / "built.js").write_text("2\n")
    (dist / "sub" / "deep.js").write_text("3\n")
    (dist / ".gitignore").write_text("!*.js\n")
    (committed / ".gitignore").write_text("x.ts\nnotes.ts\ndist/\n")
    git(committed, "add", "-f", "dist/kept.js")
    files, err = sent(committed)
    assert files == {"x.ts", "test/x.test.ts", "dist/kept.js"}
    assert "dist/.gitignore, dist/built.js, dist/sub/, notes.ts (.gitignore;" in err
    # The directory brought back whole, then all of it but one file left out again.
    files, _ = sent(committed, "--exclude", "!/dist/", "--exclude", "/dist/*")
    assert files == {"x.ts", "test/x.test.ts"}
    files, _ = sent(committed, "--exclude", "!/dist/")
    assert {"dist/kept.js", "dist/built.js", "dist/sub/deep.js"} <= files


def test_an_index_that_cannot_be_read_is_said_and_gitignore_applies_to_all(
    committed: Path,
) -> None:
    index = committed / ".git" / "index"
    index.write_bytes(index.read_bytes()[:-7])
    files, err = sent(committed)
    assert files == {"test/x.test.ts"}
    assert f"git's index {index} was not read (" in err


def test_a_project_below_the_work_tree_root_keeps_its_tracked_files(committed: Path) -> None:
    """The index names paths from the work tree's root; DIR's are relative to DIR."""
    package = committed / "packages" / "app"
    (package / "lib").mkdir(parents=True)
    (package / "lib" / "gen.ts").write_text("export const gen = 1\n")
    (package / "lib" / "other.ts").write_text("export const other = 1\n")
    (committed / ".gitignore").write_text("gen.ts\nother.ts\n")
    git(committed, "add", "-f", "packages/app/lib/gen.ts")
    files, err = sent(package)
    assert files == {"lib/gen.ts"}
    assert "lib/other.ts (.gitignore; bring one back with --exclude '!/lib/other.ts')" in err


def test_a_committed_bunfig_toml_gitignore_lists_is_sent_and_its_preload_named(
    committed: Path,
) -> None:
    """As in matrix-analysis: before, it was left out and the preload warning never came."""
    (committed / "bunfig.toml").write_text('[test]\npreload = ["./setup.ts"]\n')
    (committed / ".gitignore").write_text("x.ts\nbunfig.toml\n")
    git(committed, "add", "-f", "bunfig.toml")
    files, err = sent(committed)
    assert "bunfig.toml" in files
    assert (
        "bunfig.toml: Bun runs without it" in err
        and "its settings ([test] preload) do not apply" in err
    )
