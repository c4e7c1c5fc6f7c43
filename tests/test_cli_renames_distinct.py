"""The names offered for paths refused for their characters are names a candidate sends,
one per file: `src/a b.ts`, `src/a!b.ts` and `src/a?b.ts` were all told `rename it to
src/a-b.ts`, and `x/.jig /z.ts`, `node_modules /x/n.ts` names in reserved directories,
which a candidate then silently left out (the reviewer's p5)."""

from __future__ import annotations

from pathlib import Path

from tests.admitted_example import jigcmd_cli
from tests.command.test_scaffold import project

_FILES = {
    "package.json": '{"name": "p5"}',
    "test/a.test.ts": 'import { test } from "bun:test";\ntest("a", () => {});\n',
    "src/a b.ts": "export const a = 1;\n",
    "src/a!b.ts": "export const b = 2;\n",
    "src/a?b.ts": "export const c = 3;\n",
    "src/c d.ts": "export const d = 4;\n",
    "src/c-d.ts": "export const e = 5;\n",
    "x/.jig /z.ts": "export const z = 6;\n",
    "node_modules /x/n.ts": "export const n = 7;\n",
}


def _fixes(stderr: str) -> dict[str, str]:
    """Each refused path's fix, by path."""
    return {
        line.strip().split(": ", 1)[0]: line.rsplit("; fix: ", 1)[1]
        for line in stderr.splitlines()
        if "(rule path-grammar); fix: " in line
    }


def test_request_offers_each_refused_path_a_name_of_its_own(tmp_path: Path) -> None:
    root = project(tmp_path / "jigcmd-r32K-p5", _FILES)
    done = jigcmd_cli("request", "tests", "--files", str(root))
    assert done.returncode == 2, done.stderr
    fixes = _fixes(done.stderr)
    assert fixes["src/a b.ts"].startswith("rename it to src/a-b.ts, or"), fixes
    assert fixes["src/a!b.ts"].startswith("rename it to src/a-b-2.ts, or"), fixes
    assert fixes["src/a?b.ts"].startswith("rename it to src/a-b-3.ts, or"), fixes
    # A file sent already has the plain name.
    assert fixes["src/c d.ts"].startswith("rename it to src/c-d-2.ts, or"), fixes
    # Never a name in a reserved directory, which the candidate would leave out.
    assert fixes["x/.jig /z.ts"].startswith("rename it, or leave it out"), fixes
    assert fixes["node_modules /x/n.ts"].startswith("rename it, or leave it out"), fixes


def test_init_offers_each_refused_path_a_name_of_its_own(tmp_path: Path) -> None:
    root = project(tmp_path / "jigcmd-r32K-p5", _FILES)
    done = jigcmd_cli("init", str(root))
    assert done.returncode == 2, done.stderr
    offered = [fix.split(", or", 1)[0] for fix in _fixes(done.stderr).values()]
    named = [fix.removeprefix("rename it to ") for fix in offered if fix != "rename it"]
    assert len(named) == len(set(named)) == 4, done.stderr
    assert not any("node_modules" in name or ".jig" in name for name in named), named
