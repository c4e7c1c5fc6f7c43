"""A project's `.git` is the candidate's to write: a crafted index, a `.git` file naming
nothing usable, a NUL byte, a split index. `--files` reads each in bounded memory, keeps
every `.gitignore` up to the work tree's root, and says why no file counts as tracked."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gitrepo import git


def request(root: Path) -> tuple[set[str], str]:
    """The files `jigcmd request` sends for `root`, and its stderr (it must not fail)."""
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "request", "tests", "--files", str(root)],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout)["params"]["input"]["files"]), done.stderr


def project(root: Path) -> Path:
    """A project with one file its .gitignore lists, so that the index is read."""
    root.mkdir(parents=True)
    (root / "package.json").write_text('{"name": "p"}\n')
    (root / "a.test.ts").write_text('import {test} from "bun:test";\ntest("a", () => {});\n')
    (root / ".gitignore").write_text("ignored.txt\n")
    (root / "ignored.txt").write_text("x\n")
    return root


def index_v2(paths: list[bytes]) -> bytes:
    """A version 2 index naming `paths` (regular files, zero stat data and object names)."""
    entries = b""
    for path in sorted(paths):
        body = struct.pack(">10I", 0, 0, 0, 0, 0, 0, 0o100644, 0, 0, 0) + bytes(20)
        body += struct.pack(">H", min(len(path), 0xFFF)) + path
        entries += body + bytes(8 - len(body) % 8)
    data = b"DIRC" + struct.pack(">II", 2, len(paths)) + entries
    return data + hashlib.sha1(data).digest()


# Runs argv, exits with its status and prints its peak resident memory in KiB (wait4: that
# child's alone).
PEAK = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_an_index_of_deeply_nested_paths_is_read_in_memory_bounded_by_its_size(
    tmp_path: Path,
) -> None:
    """The reviewer's index: 100 paths 2,000 directories deep, 400 KB. Every parent of
    every path once went into a set, 400 MB of them; now a search in the sorted paths."""
    root = project(tmp_path / "deep")
    (root / ".git").mkdir()
    paths = [b"d%05d/" % i + b"a/" * 2000 + b"f" for i in range(100)]
    (root / ".git" / "index").write_bytes(index_v2(paths))
    argv = [sys.executable, "-m", "jigcmd", "request", "tests", "--files", str(root)]
    # Measured from a small parent: Linux counts the memory a process had before its exec
    # (a fork of this big pytest process) in its peak, but not its parent's.
    done = subprocess.run(
        [sys.executable, "-c", PEAK, *argv],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    peak_kib = int(done.stdout)
    assert peak_kib < 200 * 1024, f"peak {peak_kib} KiB"


def test_a_tracked_file_deep_below_an_ignored_directory_is_still_sent(tmp_path: Path) -> None:
    """The search finds a directory holding a tracked file at any depth, and only that."""
    root = project(tmp_path / "kept")
    (root / ".gitignore").write_text("gen/\n")
    for name in ("gen/a/b/kept.ts", "gen/a/b/built.ts", "gen/ab/other.ts", "gen/a.ts"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("1\n")
    (root / ".git").mkdir()
    (root / ".git" / "index").write_bytes(index_v2([b"gen/a/b/kept.ts", b"gen/a.ts"]))
    files, _ = request(root)
    assert {name for name in files if name.startswith("gen/")} == {"gen/a/b/kept.ts", "gen/a.ts"}


@pytest.mark.parametrize(
    "dot_git",
    [b"", b"garbage\n", b"gitdir: a\0b\n", "symlink"],
    ids=["empty", "no-gitdir-line", "nul-byte", "symlink"],
)
def test_a_dot_git_naming_no_git_directory_keeps_the_gitignore_above(
    tmp_path: Path, dot_git: bytes | str
) -> None:
    """The reviewer's x8: the work tree's `*.env` still leaves out the project's a.env, and
    a NUL byte in `.git` is a note, never a traceback."""
    top = tmp_path / "x8"
    root = project(top / "proj")
    (root / "a.env").write_text("SECRET=1\n")
    (top / ".gitignore").write_text("*.env\n")
    if isinstance(dot_git, bytes):
        (top / ".git").write_bytes(dot_git)
    else:
        (tmp_path / "elsewhere").write_text("gitdir: /nowhere\n")
        (top / ".git").symlink_to(tmp_path / "elsewhere")
    files, err = request(root)
    assert "a.env" not in files and "ignored.txt" not in files
    assert f"{top / '.git'} names no usable git directory (" in err, err
    assert "Traceback" not in err


def test_a_nul_byte_in_commondir_is_a_note_not_a_traceback(tmp_path: Path) -> None:
    root = project(tmp_path / "p4")
    (root / "gd").mkdir()
    (root / "gd" / "commondir").write_bytes(b"x\0y\n")
    (root / ".git").write_text("gitdir: gd\n")
    files, err = request(root)
    assert "ignored.txt" not in files
    assert "commondir holds a NUL byte" in err, err


@pytest.mark.parametrize("init", [(), ("--object-format=sha256",)], ids=["v2-sha1", "v4-sha256"])
def test_a_split_index_is_named_as_one(tmp_path: Path, init: tuple[str, ...]) -> None:
    """A changed entry of a split index has no name (the shared index holds it): that is
    said to be a split index, not a malformed path."""
    root = project(tmp_path / "split")
    git(root, "init", "-q", *init)
    if init:
        git(root, "config", "index.version", "4")
    git(root, "add", ".gitignore", "package.json", "a.test.ts")
    git(root, "commit", "-q", "-m", "i")
    git(root, "update-index", "--split-index")
    (root / "package.json").write_text('{"name": "q"}\n')
    git(root, "add", "package.json")
    _, err = request(root)
    assert "was not read (it is a split index, core.splitIndex)" in err, err
