"""Reading a Binding from disk: the file, its package, its manifest and descriptor copies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from jigcmd.command.bindingfile import load_binding, project_root, read_manifest
from jigcmd.policy.binding import BindingError
from jigcmd.policy.manifest import ManifestError

DESCRIPTOR = Path(__file__).parents[2] / "schemas" / "project-command.capability.json"
DESCRIPTOR_BYTES = DESCRIPTOR.read_bytes()

GOOD_COMMANDS = {
    "cli": {"run": "src/cli.ts"},
    "tests": {"test": ["test/a.test.ts", "test/b.spec.js"]},
}


def make_package(root: Path, *, declare: bool = True) -> Path:
    """Create a package directory whose FLOW.md declares the capability in slot 'project'."""
    package = root / "pkg"
    (package / "contracts").mkdir(parents=True)
    shutil.copyfile(DESCRIPTOR, package / "contracts" / "project-command.json")
    uses = "uses:\n  project:\n    contract: ./contracts/project-command.json\n" if declare else ""
    (package / "FLOW.md").write_text(f"---\nname: demo\n{uses}---\n# Demo\n")
    return package


def test_load_binding_reads_toml_and_resolves_the_package(tmp_path: Path) -> None:
    """A TOML Binding loads, with the package resolved against the Binding file's directory."""
    package = make_package(tmp_path)
    path = tmp_path / "binding.toml"
    path.write_text(
        'package = "pkg"\n[commands.cli]\nrun = "src/cli.ts"\n'
        '[commands.tests]\ntest = ["test/a.test.ts"]\n'
    )
    loaded = load_binding(path)
    assert loaded.package_dir == package.resolve()
    assert loaded.slots == ("project",)
    assert loaded.manifest == package.resolve() / "FLOW.md"
    assert list(loaded.binding.commands) == ["cli", "tests"]


def test_a_loaded_binding_names_every_package_file_its_admission_read(tmp_path: Path) -> None:
    """Each manifest name (one may appear later) and the contract copy: what serving watches."""
    package = make_package(tmp_path).resolve()
    path = tmp_path / "binding.toml"
    path.write_text('package = "pkg"\n[commands.cli]\nrun = "src/cli.ts"\n')
    assert load_binding(path).package_files == (
        package / "FLOW.md",
        package / "flow.meta.json",
        package / "contracts" / "project-command.json",
    )


def test_a_script_bindings_project_root_is_the_same_named_relative_from_bindings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`command.ts` from inside `bindings/` finds jig.ts's directory, as its absolute path does."""
    (tmp_path / "bindings").mkdir()
    (tmp_path / "jig.ts").write_text("export default {}\n")
    monkeypatch.chdir(tmp_path / "bindings")
    assert project_root(Path("command.ts")) == project_root(tmp_path / "bindings/command.ts")
    assert project_root(Path("command.ts")) == tmp_path


def test_load_binding_reads_json(tmp_path: Path) -> None:
    """A JSON Binding loads the same way."""
    make_package(tmp_path)
    path = tmp_path / "binding.json"
    path.write_text(json.dumps({"package": "pkg", "commands": GOOD_COMMANDS}))
    assert list(load_binding(path).binding.commands) == ["cli", "tests"]


def test_load_binding_refuses_commands_for_an_undeclared_package(tmp_path: Path) -> None:
    """Commands on a package whose manifest declares nothing are refused, naming the manifest."""
    make_package(tmp_path, declare=False)
    path = tmp_path / "binding.toml"
    path.write_text('package = "pkg"\n[commands.cli]\nrun = "src/cli.ts"\n')
    with pytest.raises(BindingError, match=r"FLOW\.md has no matching 'uses' entry") as caught:
        load_binding(path)
    assert caught.value.rule == "capability"


def test_load_binding_refuses_commands_for_a_package_without_manifest(tmp_path: Path) -> None:
    """Commands on a package with no manifest at all are refused."""
    (tmp_path / "pkg").mkdir()
    path = tmp_path / "binding.toml"
    path.write_text('package = "pkg"\n[commands.cli]\nrun = "src/cli.ts"\n')
    with pytest.raises(BindingError, match=r"no FLOW.md or flow.meta.json"):
        load_binding(path)


def test_load_binding_allows_an_empty_policy_without_manifest(tmp_path: Path) -> None:
    """A Binding granting nothing loads even if the package declares nothing."""
    (tmp_path / "pkg").mkdir()
    path = tmp_path / "binding.toml"
    path.write_text('package = "pkg"\n')
    assert load_binding(path).binding.commands == {}


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("binding.toml", "package = ", "not valid TOML"),
        ("binding.json", '{"package": "pkg", "package": "x"}', "duplicate key 'package'"),
        ("binding.json", "{", "not valid JSON"),
        ("binding.yaml", "package: pkg", "ends in .toml or .json"),
    ],
)
def test_unreadable_binding_files_are_refused(
    tmp_path: Path, name: str, content: str, reason: str
) -> None:
    """Syntax errors, duplicate keys and unknown suffixes are binding-file errors."""
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(BindingError, match=reason) as caught:
        load_binding(path)
    assert caught.value.rule == "binding-file"


def test_a_missing_package_directory_is_refused(tmp_path: Path) -> None:
    """The package must be an existing directory."""
    path = tmp_path / "binding.toml"
    path.write_text('package = "nowhere"\n')
    with pytest.raises(BindingError, match="does not exist") as caught:
        load_binding(path)
    assert (caught.value.pointer, caught.value.rule) == ("/package", "package")


def test_an_invalid_manifest_is_a_binding_error(tmp_path: Path) -> None:
    """A broken manifest surfaces as a BindingError with rule 'manifest'."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "flow.meta.json").write_text('{"uses": {"project": {"contract": "../x.json"}}}')
    path = tmp_path / "binding.toml"
    path.write_text('package = "pkg"\n')
    with pytest.raises(BindingError, match="escapes the package directory") as caught:
        load_binding(path)
    assert caught.value.rule == "manifest"


def test_read_manifest_prefers_flow_md_and_reads_contracts_from_disk(tmp_path: Path) -> None:
    """FLOW.md is read when present, and the contract path is relative to the package."""
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "pc.json").write_bytes(DESCRIPTOR_BYTES)
    (tmp_path / "FLOW.md").write_text("---\nuses:\n  proj:\n    contract: c/pc.json\n---\n")
    (tmp_path / "flow.meta.json").write_text('{"uses": {}}')
    declared = read_manifest(tmp_path)
    assert (declared.manifest, declared.slots) == (tmp_path / "FLOW.md", ("proj",))


def test_read_manifest_reads_flow_meta_json(tmp_path: Path) -> None:
    """flow.meta.json is the manifest when there is no FLOW.md."""
    (tmp_path / "pc.json").write_bytes(DESCRIPTOR_BYTES)
    (tmp_path / "flow.meta.json").write_text('{"uses": {"project": {"contract": "pc.json"}}}')
    assert read_manifest(tmp_path).slots == ("project",)


def test_read_manifest_without_manifest_declares_nothing(tmp_path: Path) -> None:
    """A package without a manifest has no manifest path and no slots."""
    declared = read_manifest(tmp_path)
    assert (declared.manifest, declared.slots) == (None, ())


def test_a_symlinked_contract_outside_the_package_is_refused(tmp_path: Path) -> None:
    """A contract path that resolves outside the package through a symlink is refused."""
    outside = tmp_path / "outside.json"
    outside.write_bytes(DESCRIPTOR_BYTES)
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "pc.json").symlink_to(outside)
    (package / "flow.meta.json").write_text('{"uses": {"project": {"contract": "pc.json"}}}')
    with pytest.raises(ManifestError, match="resolves outside"):
        read_manifest(package)


def test_a_missing_contract_file_is_refused(tmp_path: Path) -> None:
    """A uses entry naming a file that does not exist is an error."""
    (tmp_path / "flow.meta.json").write_text('{"uses": {"project": {"contract": "nope.json"}}}')
    with pytest.raises(ManifestError, match=r"'nope\.json' cannot be read"):
        read_manifest(tmp_path)
