"""`jigcmd init`'s hints on a person's own project: fixes that keep what the tests import,
a bundling example that can run on the host, and every part of a split suite named."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from jigcmd import cli
from jigcmd.policy import imports
from tests.command.test_scaffold import project
from tests.frontends.test_init import jigcmd

_TEST = (
    'import { test, expect } from "bun:test";\n'
    'import { big } from "../src/big";\n'
    'import { s } from "../src/latin1";\n'
    'import { v1 } from "../src/m1";\n'
    'test("big", () => expect(big.length > 0).toBe(true));\n'
)


def _heavy(root: Path, big: int, unused: int = 0) -> Path:
    """A test importing a `big`-character file and a Latin-1 one, beside 70 files it never
    imports (and an `unused` file of that many bytes): the tester's p3b and p3c."""
    files = {"package.json": '{"name": "heavy"}', "test/a.test.ts": _TEST}
    files |= {f"src/m{i}.ts": f"export const v{i} = {i};\n" for i in range(1, 71)}
    files["src/big.ts"] = f'export const big = "{"a" * big}";\n'
    if unused:
        files["src/unused.txt"] = "u" * unused
    project(root, files)
    (root / "src" / "latin1.ts").write_bytes(b'export const s = "caf\xe9";\n')
    return root


def test_no_fix_leaves_out_what_the_test_imports_and_an_imported_big_file_is_said_plainly(
    tmp_path: Path,
) -> None:
    """The imported file too large to send and the imported Latin-1 one are kept by the
    count fix, never named as an --exclude, and the size fix says no --exclude can help."""
    root = _heavy(tmp_path / "p3b", big=300_000)
    done = jigcmd("init", str(root))
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert "--exclude '/src/big.ts'" not in done.stderr
    assert "--exclude '/src/latin1.ts'" not in done.stderr
    assert (
        "  src/latin1.ts: not UTF-8 text (a candidate carries text only) (rule file-text); fix: "
        "convert it to UTF-8 (leaving it out is no fix: test/a.test.ts imports it)"
    ) in lines
    (count,) = [line for line in lines if "(rule files)" in line]
    assert "--exclude '!/src/big.ts'" in count and "--exclude '!/src/latin1.ts'" in count
    (size,) = [line for line in lines if "(rule candidate-size)" in line]
    assert size.endswith(
        "fix: none by --exclude: src/big.ts (300,023 bytes) alone is more than that, and "
        "test/a.test.ts imports it; make it smaller (or have the command make it when it "
        "runs), or lock a Binding whose commands do not need it"
    )


def test_the_largest_file_named_by_the_size_fix_is_the_largest_no_command_file_imports(
    tmp_path: Path,
) -> None:
    """The imported 200 KB file is larger, but the fix may only leave out the unused one."""
    root = _heavy(tmp_path / "p3c", big=200_000, unused=100_011)
    done = jigcmd("init", str(root))
    assert done.returncode == 2
    (size,) = [line for line in done.stderr.splitlines() if "(rule candidate-size)" in line]
    assert size.endswith(
        "fix: leave out large files with --exclude GLOB, e.g. --exclude '/src/unused.txt'; "
        "the largest file that no command file imports, enough by itself: src/unused.txt "
        "(100,011 bytes)"
    )


def test_the_size_fix_says_only_that_no_file_imports_a_fixture_a_test_reads_by_name(
    tmp_path: Path,
) -> None:
    """The tester's big6b: the test reads the fixture with `Bun.file`, which jigcmd does not
    follow; the fix says what it knows (no import), never that the commands do not need it."""
    test = (
        'import { test, expect } from "bun:test";\n'
        'test("fixture loads", async () => {\n'
        '  expect((await Bun.file("fixtures/users.json").json()).length).toBe(1);\n'
        "});\n"
    )
    files = {"package.json": '{"name": "big6b"}', "test/users.test.ts": test}
    root = project(tmp_path / "big6b", files | {"fixtures/users.json": f'["{"u" * 300_000}"]'})
    done = jigcmd("init", str(root))
    assert done.returncode == 2
    (size,) = [line for line in done.stderr.splitlines() if "(rule candidate-size)" in line]
    assert size.endswith(
        "e.g. --exclude '/fixtures/users.json'; the largest file that no command file imports, "
        "enough by itself: fixtures/users.json (300,004 bytes)"
    )
    assert "do not need" not in size


def _deps(root: Path, installed: list[str]) -> Path:
    """The tester's p2: one test imports a package the host has, another one it has not."""
    files = {
        "package.json": '{"name": "deps", "dependencies": {"tiny-pad": "1", "absent-pkg": "3"}}',
        "test/missing.test.ts": 'import "bun:test";\nimport thing from "absent-pkg";\n',
        "test/pad.test.ts": 'import "bun:test";\nimport pad from "tiny-pad";\n',
    }
    for name in installed:
        files[f"node_modules/{name}/index.js"] = "module.exports = 1;\n"
    return project(root, files)


def test_the_bundling_example_builds_every_test_reaching_a_package(tmp_path: Path) -> None:
    """Both tests reach a package: one `bun build` each, so that one paste makes every
    bundle; `bun install` comes first, for the host lacks absent-pkg (`bun build` fails on
    it)."""
    root = _deps(tmp_path / "p2", ["tiny-pad"])
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert (
        "or bundle on the host once `bun install` has put absent-pkg in its node_modules/ "
        "(not there now, so `bun build test/missing.test.ts --outdir bundled --target bun "
        "--external bun:test --minify && bun build test/pad.test.ts --outdir bundled --target "
        "bun --external bun:test --minify` cannot resolve it), and name each bundle "
        "(bundled/missing.test.js, bundled/pad.test.js) instead of its file "
        "(docs/binding.md#dependencies-and-workspaces)"
    ) in done.stderr


def test_with_every_package_on_the_host_the_bundling_example_runs_as_it_is(
    tmp_path: Path,
) -> None:
    root = _deps(tmp_path / "p2", ["tiny-pad", "absent-pkg"])
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    assert (
        "or bundle on the host, `bun build test/missing.test.ts --outdir bundled --target bun "
        "--external bun:test --minify && bun build test/pad.test.ts --outdir bundled --target "
        "bun --external bun:test --minify`, and name each bundle (bundled/missing.test.js, "
        "bundled/pad.test.js) instead of its file (docs/binding.md#dependencies-and-workspaces)"
    ) in done.stderr
    assert "bun install" not in done.stderr


def test_a_split_suite_is_said_on_stderr_and_every_part_gets_its_run_line(
    tmp_path: Path,
) -> None:
    """20 test files are `tests` and `tests-2`: `next:` names both, not `tests` alone."""
    files = {f"test/t{i:02}.test.ts": 'import "bun:test";\n' for i in range(1, 21)}
    root = project(tmp_path / "p19", {"package.json": '{"name": "p19"}', **files})
    done = jigcmd("init", str(root))
    assert done.returncode == 0, done.stderr
    binding = root / ".jig" / "binding.toml"
    assert done.stdout.splitlines()[-4:] == [
        "next: review the commands and admit them, then run each against the project (the "
        "tests are split across 2 commands):",
        f"  jigcmd lock --binding {binding}",
        f"  jigcmd run --binding {binding} tests --files {root}",
        f"  jigcmd run --binding {binding} tests-2 --files {root}",
    ]
    assert (
        f"jigcmd init: {root}: 20 test files split into 2 commands (tests, tests-2): a command "
        "names at most 16 test files (the Binding's limit); run each of them to run the whole "
        "suite"
    ) in done.stderr.splitlines()


def test_init_resolves_each_import_of_a_barrel_layout_a_bounded_number_of_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """2,000 modules import a declared package and the index re-exporting them all (the
    host has no node_modules/): the bundling example walks the imports once, not once per
    importer (quadratic: 16 s for 1,500 files), though `init` then refuses the count."""
    n = 2000
    files = {
        "package.json": '{"name": "barrel", "dependencies": {"zod": "3"}}',
        "src/index.ts": "".join(f'export * from "./m{i}";\n' for i in range(n)),
        "src/a.test.ts": 'import "./index";\nimport { test } from "bun:test";\n',
    }
    for i in range(n):
        files[f"src/m{i}.ts"] = 'import { z } from "zod";\nimport * as all from "./index";\n'
    project(tmp_path / "barrel", files)
    specifiers = 2 * n + 1
    calls = 0
    resolve = imports._resolve

    def counted(importer: str, specifier: str, within: Mapping[str, str]) -> str | None:
        nonlocal calls
        calls += 1
        return resolve(importer, specifier, within)

    monkeypatch.setattr(imports, "_resolve", counted)
    assert cli.main(["init", str(tmp_path / "barrel")]) == 2
    stderr = capsys.readouterr().err
    assert "(not there now, so `bun build src/a.test.ts --outdir bundled" in stderr
    assert "(rule files)" in stderr
    # Once for the bundling example, once for the refusal's fix.
    assert calls <= 2 * specifiers


def test_init_says_odd_file_names_inertly_and_quotes_them_in_the_commands_it_suggests(
    tmp_path: Path,
) -> None:
    """A name with an escape or a newline cannot colour the terminal or forge a line of
    stderr, in a note or in a refusal's fix; the bundling example is for the test that runs
    the odd file, whose own name no command may hold."""
    root = project(
        tmp_path / "odd",
        {
            "package.json": '{"name": "odd", "dependencies": {"zod": "1"}}',
            "a.test.ts": 'import "./a;touch PWNED;.ts";\nimport { test } from "bun:test";\n',
            "a;touch PWNED;.ts": 'import "zod";\n',
            "z\x1b[2Kq.ts": 'import "zod";\n',
        },
    )
    (root / "evil\x1b[31mRED\nINJECTED line.bin").write_bytes(b"\x00\x01")
    done = jigcmd("init", str(root))
    assert done.returncode == 2
    assert "\x1b" not in done.stderr
    assert all(line.startswith(("jigcmd init: ", "  ")) for line in done.stderr.splitlines())
    assert "left out of the candidate: evil\\x1b[31mRED\\nINJECTED line.bin (binary)" in done.stderr
    assert "(zod: a;touch PWNED;.ts) that the commands' files import" in done.stderr
    assert "`bun build a.test.ts --outdir bundled" in done.stderr
    # In ANSI-C quotes: pasted, the shell reads the ESC back (`test_cli_run_exclude_pasted`).
    assert "leave it out with --exclude $'/z\\x1b\\\\[2Kq.ts'" in done.stderr
    assert not (root / "PWNED").exists()
