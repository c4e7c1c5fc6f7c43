"""`jigcmd init` on a project someone handed over, each file of it as hard to scan as it can be.

Every file `init` reads as source, package.json and tsconfig.json is chosen against one
scan: a workspace glob or a `paths` key that made a regular expression backtrack
exponentially, and files the size of a whole candidate that made a scan quadratic (minutes
each). Each project is one `init` run under the helper's timeout, so a scan that is no
longer linear fails the test instead of stalling the suite; what `init` says is what it said
of the same project before.
"""

from __future__ import annotations

import json
from pathlib import Path

from jigcmd.contract import MAX_CANDIDATE_BYTES
from tests.command.test_scaffold import project
from tests.frontends.test_init import jigcmd

# A file as large as a candidate may hold with its few small neighbours.
_WHOLE = MAX_CANDIDATE_BYTES - 1024
# Fourteen `*a` then a `b`: a regular expression tries every way to place the `a`s in a
# name of forty (12 already took 100 s), and finds none.
_BACKTRACKS = "*a" * 14 + "b"
_NAME = "a" * 40


def test_a_workspace_glob_that_cannot_match_costs_no_more_than_one_that_can(
    tmp_path: Path,
) -> None:
    """A member named by the second glob after one that backtracks: its `bin` is a command,
    and a directory the `!` glob names is none."""
    globs = [_BACKTRACKS, "a*", f"!{_BACKTRACKS}", "!a*z"]
    root = project(
        tmp_path / "p",
        {
            "package.json": json.dumps({"name": "p", "workspaces": globs}),
            f"{_NAME}/package.json": '{"name": "m", "bin": {"tool": "./cli.ts"}}',
            f"{_NAME}/cli.ts": "",
            f"{_NAME}z/package.json": '{"name": "n", "bin": {"gone": "./cli.ts"}}',
            f"{_NAME}z/cli.ts": "",
            "a.test.ts": "",
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    text = (root / ".jig" / "binding.toml").read_text()
    assert f'[commands.tool]\nrun = "{_NAME}/cli.ts"' in text
    assert "gone" not in text


def test_a_tsconfig_paths_key_that_cannot_match_maps_nothing(tmp_path: Path) -> None:
    """The key matches no package, so the package imported is still named as missing."""
    root = project(
        tmp_path / "p",
        {
            "package.json": json.dumps({"name": "p", "dependencies": {_NAME: "1"}}),
            "tsconfig.json": json.dumps({"compilerOptions": {"paths": {_BACKTRACKS: ["./x"]}}}),
            "a.test.ts": f'import "{_NAME}";\n',
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert f"package.json declares 1 dependency ({_NAME}: a.test.ts) that" in done.stderr


def test_an_unclosed_tag_of_a_whole_candidate_is_no_markup(tmp_path: Path) -> None:
    """`<a-a-a…` never closes: only the test with real markup is named as holding some."""
    root = project(
        tmp_path / "p",
        {
            "tag.test.tsx": "<a" + "-a" * (_WHOLE // 2),
            "ui.test.tsx": "render(<b/>);\n",
            "ok.test.ts": "",
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert "but ui.test.tsx holds JSX markup" in done.stderr
    assert "tag.test.tsx holds" not in done.stderr


def test_an_unclosed_string_of_escaped_quotes_hides_no_import(tmp_path: Path) -> None:
    """`"\\"\\"…` to the end of a file: the file next to it still imports `zod`."""
    root = project(
        tmp_path / "p",
        {
            "package.json": '{"name": "p", "dependencies": {"zod": "3"}}',
            "src/quotes.ts": '"' + '\\"' * (_WHOLE // 2),
            "a.test.ts": 'import { z } from "zod";\n',
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert "package.json declares 1 dependency (zod: a.test.ts) that" in done.stderr


def test_an_import_keyword_before_a_whole_candidate_of_spaces_reaches_nothing(
    tmp_path: Path,
) -> None:
    """`import` then spaces in a test, whose relative imports `init` follows: the test is
    the command's, and the candidate is sent as it is."""
    root = project(tmp_path / "p", {"a.test.ts": "import" + " " * _WHOLE})
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert 'test = [\n    "a.test.ts",\n]' in (root / ".jig" / "binding.toml").read_text()


def test_import_keywords_before_whole_candidates_of_spaces_import_no_package(
    tmp_path: Path,
) -> None:
    """`import`, `import type` and `export` then spaces, three files each as large as a
    candidate (so it is refused): the one package imported is still named, and no other."""
    root = project(
        tmp_path / "p",
        {
            "package.json": '{"name": "p", "dependencies": {"zod": "3"}}',
            "src/one.ts": "import" + " " * _WHOLE,
            "src/two.ts": "import type" + " " * _WHOLE,
            "src/three.ts": "export" + " " * _WHOLE,
            "a.test.ts": 'import "zod";\n',
        },
    )
    done = jigcmd("init", str(root))
    assert done.returncode == 2, done.stderr
    assert "package.json declares 1 dependency (zod: a.test.ts) that" in done.stderr
