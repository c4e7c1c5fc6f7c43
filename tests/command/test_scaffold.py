"""The Binding `jigcmd init` writes: commands found in the project, nothing overwritten."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jigcmd.command.bindingfile import load_binding
from jigcmd.command.projectdir import read_project
from jigcmd.command.scaffold import ScaffoldError, plan_scaffold
from jigcmd.command.scaffoldfiles import WRITERS, binding_toml, shipped_descriptor, write_scaffold
from jigcmd.contract import CONTRACT_DIGEST
from jigcmd.jsonio import strict
from jigcmd.policy.binding import parse_binding_file
from jigcmd.policy.digests import descriptor_digest

REPO = Path(__file__).resolve().parents[2]


def project(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_the_tests_and_the_named_entry_point_become_the_commands(tmp_path: Path) -> None:
    """*.test.ts and *.spec.js anywhere but node_modules; package.json's module is `start`."""
    root = project(
        tmp_path / "My_App",
        {
            "package.json": json.dumps({"name": "@acme/My_App", "module": "./index.ts"}),
            "index.ts": "",
            "test/b.test.ts": "",
            "a.spec.js": "",
            "src/util.ts": "",
            "node_modules/dep/x.test.ts": "",
        },
    )
    scaffold = plan_scaffold(read_project(root))
    assert scaffold.name == "my-app"
    assert dict(scaffold.commands) == {
        "tests": ("test", ("a.spec.js", "test/b.test.ts")),
        "start": ("run", ("index.ts",)),
    }


def test_more_than_sixteen_tests_are_split_across_commands(tmp_path: Path) -> None:
    """A Binding's command lists at most 16 test files: tests, tests-2, …"""
    root = project(tmp_path / "p", {f"t/t{i:02}.test.ts": "" for i in range(20)})
    commands = plan_scaffold(read_project(root)).commands
    assert list(commands) == ["tests", "tests-2"]
    assert len(commands["tests"][1]) == 16 and len(commands["tests-2"][1]) == 4


def test_a_project_with_nothing_to_review_is_refused(tmp_path: Path) -> None:
    """No test file and no entry point: there is no command to write."""
    root = project(tmp_path / "p", {"README.md": "", "package.json": "{}"})
    with pytest.raises(ScaffoldError, match="no test files"):
        plan_scaffold(read_project(root))


def test_the_name_falls_back_to_the_directory_and_can_be_given(tmp_path: Path) -> None:
    """Without package.json the directory names the package; --name must be a LocalName."""
    root = project(tmp_path / "Cool Stuff", {"a.test.ts": ""})
    assert plan_scaffold(read_project(root)).name == "cool-stuff"
    assert plan_scaffold(read_project(root), "mine").name == "mine"
    with pytest.raises(ScaffoldError, match="lowercase words"):
        plan_scaffold(read_project(root), "Not_Local")


def test_the_toml_writer_gives_a_binding_with_exactly_those_commands(tmp_path: Path) -> None:
    """The written text parses, under the Binding's own rules, into the same commands."""
    root = project(
        tmp_path / "p", {"index.js": "", "x.test.ts": "", "package.json": '{"main": "index.js"}'}
    )
    scaffold = plan_scaffold(read_project(root))
    text = binding_toml(scaffold, root)
    binding = parse_binding_file(text.encode(), suffix=".toml", source="init")
    assert binding.package == "flows/p"
    assert {n: (c.kind, c.paths) for n, c in binding.commands.items()} == dict(scaffold.commands)
    assert WRITERS["toml"] == ("binding.toml", binding_toml)


def test_the_shipped_descriptor_is_the_contracts_exact_copy() -> None:
    """Byte for byte the published schema, and its digest is the contract's."""
    data = shipped_descriptor()
    assert data == (REPO / "schemas" / "project-command.capability.json").read_bytes()
    assert descriptor_digest(strict.loads(data)) == CONTRACT_DIGEST


def test_the_written_binding_loads_as_lock_loads_it(tmp_path: Path) -> None:
    """binding.toml, FLOW.md and the descriptor copy: the package declares the capability."""
    root = project(tmp_path / "p", {"a.test.ts": ""})
    path = write_scaffold(root / ".jig", plan_scaffold(read_project(root)), root)
    loaded = load_binding(path)
    assert loaded.slots == ("command",)
    assert loaded.package_dir == (root / ".jig" / "flows" / "p").resolve()
    assert set(loaded.binding.commands) == {"tests"}


def test_nothing_is_overwritten_and_nothing_is_written_when_one_file_exists(
    tmp_path: Path,
) -> None:
    """An existing FLOW.md alone refuses the whole write; the Binding does not appear."""
    root = project(tmp_path / "p", {"a.test.ts": ""})
    scaffold = plan_scaffold(read_project(root))
    manifest = root / ".jig" / "flows" / "p" / "FLOW.md"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("mine")
    with pytest.raises(ScaffoldError, match="overwrites nothing"):
        write_scaffold(root / ".jig", scaffold, root)
    assert manifest.read_text() == "mine"
    assert not (root / ".jig" / "binding.toml").exists()


def test_test_files_bun_runs_outside_the_binding_rule_are_named_not_dropped(
    tmp_path: Path,
) -> None:
    """.tsx, .mts, .jsx and `_test` files Bun runs: not reviewable, so named with the fix."""
    root = project(
        tmp_path / "p",
        {
            "test/app.test.ts": "",
            "test/comp.test.tsx": "",
            "test/m.test.mts": "",
            "test/j.test.jsx": "",
            "test/u_test.ts": "",
            "test/helper-test.ts": "",
        },
    )
    scaffold = plan_scaffold(read_project(root))
    assert scaffold.commands["tests"] == ("test", ("test/app.test.ts",))
    assert scaffold.notes == (
        "4 files bare `bun test` runs left out of the commands: test/comp.test.tsx, "
        "test/j.test.jsx, test/m.test.mts, test/u_test.ts: a Binding's test path is a file "
        "whose name ends in .test.ts, .test.js, .spec.ts or .spec.js (docs/binding.md); rename "
        "them (comp.test.tsx to comp.test.ts, j.test.jsx to j.test.js, m.test.mts to "
        "m.test.ts, …) to have them reviewed",
    )


def test_entry_points_become_commands_and_the_others_are_named(tmp_path: Path) -> None:
    """`main` is `start`, each `bin` script its own command; one missing or not .ts/.js noted."""
    root = project(
        tmp_path / "p",
        {
            "package.json": json.dumps(
                {
                    "name": "app",
                    "main": "./src/main.ts",
                    "bin": {"app-cli": "src/cli.js", "gone": "src/gone.ts", "ui": "src/ui.tsx"},
                }
            ),
            "src/main.ts": "",
            "src/cli.js": "",
            "src/ui.tsx": "",
        },
    )
    scaffold = plan_scaffold(read_project(root))
    assert dict(scaffold.commands) == {
        "start": ("run", ("src/main.ts",)),
        "app-cli": ("run", ("src/cli.js",)),
    }
    assert scaffold.notes[0].startswith("no `tests` command: no test file")
    assert scaffold.notes[1:] == (
        "package.json \"bin\" 'gone' 'src/gone.ts' left out: not among the files it sends "
        "(missing, left out or ignored)",
        "package.json \"bin\" 'ui' 'src/ui.tsx' left out: not a .ts or .js file (docs/binding.md)"
        ": rename it to src/ui.ts",
    )


def test_an_accented_directory_name_keeps_its_letters(tmp_path: Path) -> None:
    """`Ünï Café` names the package `uni-cafe`: accents dropped, not whole letters."""
    root = project(tmp_path / "Ünï Café", {"test/a.test.ts": ""})
    assert plan_scaffold(read_project(root)).name == "uni-cafe"
