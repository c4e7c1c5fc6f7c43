"""The README's "Your own project", run exactly as written in a fresh HOME.

The project is what `bun init` leaves plus a person's work: `.git`, `node_modules` (with
`@types/bun`'s scoped path), bun init's `.gitignore`, a PNG, a text `bun.lock`, an ignored
`dist/`, a `.env`, and N source files under `src/` with tests that import some of them. With
50 sources `init` → `lock` → `run` exits 0 the first time; with 70 the first command refuses
once, naming the count, the limit and the `--exclude` way out, and nothing is written or run.
The `--exclude` arguments that refusal suggests then make the same three commands pass.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.required import require_root

REPO = Path(__file__).resolve().parents[1]
HEADING = "## Your own project"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489")
TESTS = 5
# What `bun init` writes into .gitignore (bun 1.x).
BUN_GITIGNORE = """# dependencies (bun install)
node_modules

# output
out
dist
*.tgz

# code coverage
coverage
*.lcov

# logs
logs
_.log
report.[0-9]_.[0-9]_.[0-9]_.[0-9]_.json

# dotenv environment variable files
.env
.env.development.local
.env.test.local
.env.production.local
.env.local

# caches
.eslintcache
.cache
*.tsbuildinfo

# IntelliJ based IDEs
.idea

# Finder (MacOS) folder config
.DS_Store
"""


def block() -> str:
    """The section's one shell block, as written."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(HEADING) :]
    section = section[: section.index("\n## ", len(HEADING))]
    (only,) = [b[: b.index("```")] for b in section.split("```sh\n")[1:]]
    return only


def bun_project(root: Path, sources: int) -> Path:
    """A `bun init` project with `sources` files in src/ and tests importing a few of them."""
    files: dict[str, str | bytes] = {
        ".gitignore": BUN_GITIGNORE,
        ".env": "TOKEN=secret\n",
        "package.json": json.dumps(
            {
                "name": "my-project",
                "module": "index.ts",
                "type": "module",
                "private": True,
                "devDependencies": {"@types/bun": "latest"},
                "peerDependencies": {"typescript": "^5"},
            },
            indent=2,
        ),
        "tsconfig.json": '{"compilerOptions": {"lib": ["ESNext"], "strict": true}}\n',
        "README.md": "# my-project\n\nTo install dependencies:\n\n    bun install\n",
        "bun.lock": '{\n  "lockfileVersion": 1,\n  "workspaces": {"": {"name": "my-project"}}\n}\n',
        "index.ts": 'import { s1 } from "./src/s1";\nconsole.log("Hello via Bun!", s1(1));\n',
        "logo.png": PNG,
        "dist/index.js": "console.log('built')\n",
        "node_modules/@types/bun/package.json": '{"name": "@types/bun"}\n',
        "node_modules/@types/bun/index.d.ts": "export {};\n",
        "node_modules/typescript/lib/typescript.js": "module.exports = {};\n",
    }
    for i in range(1, sources + 1):
        files[f"src/s{i}.ts"] = f"export const s{i} = (x: number): number => x + {i};\n"
    for i in range(1, TESTS + 1):
        files[f"test/s{i}.test.ts"] = (
            'import { test, expect } from "bun:test";\n'
            f'import {{ s{i} }} from "../src/s{i}";\n'
            f'test("s{i} adds {i}", () => expect(s{i}(1)).toBe({i + 1}));\n'
        )
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    else:
        (root / ".git").mkdir()
        (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root


def run_block(home: Path, script: str) -> subprocess.CompletedProcess[str]:
    bindir = Path(sys.executable).parent
    env = {
        **os.environ,
        "HOME": str(home),
        "JIGCMD_STATE_DIR": str(home / "state"),
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=home, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.envelope
def test_init_lock_run_passes_the_first_time_on_a_bun_project(tmp_path: Path) -> None:
    """50 sources: the three commands exit 0, the tests pass, and what was left out is said."""
    require_root()
    project = bun_project(tmp_path / "my-project", 50)
    done = run_block(tmp_path, block())
    assert done.returncode == 0, done.stdout + done.stderr
    out, err = done.stdout, done.stderr
    assert "jigcmd init: wrote " + str(project / ".jig" / "binding.toml") in out
    assert "  tests    bun test " + " ".join(f"test/s{i}.test.ts" for i in range(1, 6)) in out
    assert "  start    bun index.ts ARGS…" in out
    assert f"jigcmd lock --binding {project}/.jig/binding.toml" in out
    assert f"admitted: wrote {project}/.jig/jigcmd.lock" in out
    assert "ended:      exit code 0 (stop reason: exited, cleanup: complete)" in out
    assert f" {TESTS} pass" in out
    # One note per command that read the project: what was left out, and why.
    notes = [line for line in err.splitlines() if "left out of the candidate" in line]
    assert len(notes) == 2, err
    for part in (".git/", "node_modules/", ".env", ".gitignore", "dist/", "logo.png (binary)"):
        assert part in notes[1], notes[1]
    assert "the candidate: 60 files" in notes[1]


@pytest.mark.envelope
def test_too_many_files_is_one_refusal_before_anything_and_its_fix_works(tmp_path: Path) -> None:
    """70 sources: init refuses once (count, limit, --exclude), writes and runs nothing; the
    suggested --exclude arguments then make init, lock and run pass."""
    require_root()
    project = bun_project(tmp_path / "my-project", 70)
    done = run_block(tmp_path, block())
    assert done.returncode == 2, done.stdout + done.stderr
    refusals = [line for line in done.stderr.splitlines() if "nothing written" in line]
    assert len(refusals) == 1, done.stderr
    assert "1 problem" in refusals[0]
    (problem,) = [line for line in done.stderr.splitlines() if "(rule files)" in line]
    assert "80 files, more than the 64 a candidate may hold" in problem
    assert "--exclude GLOB" in problem
    assert not (project / ".jig").exists()
    assert not (tmp_path / "state").exists()  # no journal: nothing ran
    suggested = re.search(r"e\.g\. ((?:--exclude '[^']*' ?)+)", problem)
    assert suggested is not None, problem
    excludes = suggested.group(1).strip()
    assert "--exclude '/src/*'" in excludes and "--exclude '!/src/s1.ts'" in excludes
    fixed = (
        block()
        .replace("init ~/my-project", f"init ~/my-project {excludes}")
        .replace("--files ~/my-project", f"--files ~/my-project {excludes}")
    )
    again = run_block(tmp_path, fixed)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f" {TESTS} pass" in again.stdout
