"""Package manifests declaring the Project Command capability (spec-notes §3)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from jigcmd.policy.manifest import (
    ManifestError,
    capability_slots,
    parse_front_matter,
    read_manifest,
)

DESCRIPTOR_BYTES = (
    Path(__file__).parents[2] / "schemas" / "project-command.capability.json"
).read_bytes()
OTHER_DESCRIPTOR = json.dumps({"id": "https://example.invalid/other", "version": "1"}).encode()


def contracts(files: dict[str, bytes]) -> Callable[[str], bytes]:
    """A read_contract callback serving the given relative paths."""

    def read(relative: str) -> bytes:
        return files[relative]

    return read


def slots_of(manifest: object, files: dict[str, bytes] | None = None) -> tuple[str, ...]:
    """Run capability_slots over an in-memory package."""
    return capability_slots(
        manifest, contracts(files or {"pc.json": DESCRIPTOR_BYTES}), source="FLOW.md"
    )


def test_front_matter_between_dashes_is_parsed_as_yaml() -> None:
    """The YAML between the leading '---' lines is the manifest."""
    text = "---\nuses:\n  project: {contract: pc.json}\n---\n# body\n---\n"
    assert parse_front_matter(text, source="FLOW.md") == {
        "uses": {"project": {"contract": "pc.json"}}
    }


def test_a_document_without_front_matter_has_no_manifest() -> None:
    """Text that does not start with '---' carries no front matter."""
    assert parse_front_matter("# Title\n---\n", source="FLOW.md") is None


def test_unclosed_front_matter_is_an_error() -> None:
    """An opening fence without a closing one is refused."""
    with pytest.raises(ManifestError, match="never closed"):
        parse_front_matter("---\nuses: {}\n", source="FLOW.md")


def test_invalid_yaml_is_an_error() -> None:
    """YAML syntax errors are reported with the manifest name."""
    with pytest.raises(ManifestError, match=r"FLOW\.md: front matter is not valid YAML"):
        parse_front_matter("---\nuses: [\n---\n", source="FLOW.md")


def test_a_slot_with_an_exact_copy_declares_the_capability() -> None:
    """A uses entry naming an exact descriptor copy is a Project Command slot."""
    assert slots_of({"uses": {"project": {"contract": "pc.json"}}}) == ("project",)


def test_slots_of_other_contracts_are_skipped() -> None:
    """Only slots using the Project Command contract are returned."""
    manifest = {"uses": {"other": {"contract": "o.json"}, "project": {"contract": "pc.json"}}}
    files = {"o.json": OTHER_DESCRIPTOR, "pc.json": DESCRIPTOR_BYTES}
    assert slots_of(manifest, files) == ("project",)


@pytest.mark.parametrize("manifest", [None, {}, {"name": "x"}, {"uses": None}, {"uses": {}}])
def test_manifests_without_uses_declare_nothing(manifest: object) -> None:
    """No uses entries means no slots."""
    assert slots_of(manifest) == ()


def test_a_copy_with_another_version_is_refused() -> None:
    """Our contract ID with a different version is an error, not a silent skip."""
    descriptor = json.loads(DESCRIPTOR_BYTES)
    descriptor["version"] = "1.0.1"
    with pytest.raises(ManifestError, match=r"version '1\.0\.1' \(jigcmd implements 1\.0\.0\)"):
        slots_of(
            {"uses": {"project": {"contract": "pc.json"}}},
            {"pc.json": json.dumps(descriptor).encode()},
        )


def test_an_inexact_copy_is_refused_with_both_digests() -> None:
    """Our contract ID and version with any other change is refused, naming both digests."""
    descriptor = json.loads(DESCRIPTOR_BYTES)
    descriptor["methods"]["run"]["errors"] = {"X": {}}
    with pytest.raises(ManifestError, match=r"not an exact copy .*expected sha256:aed62fe1"):
        slots_of(
            {"uses": {"project": {"contract": "pc.json"}}},
            {"pc.json": json.dumps(descriptor).encode()},
        )


def test_reformatted_copies_are_still_exact() -> None:
    """Whitespace and key order do not matter: the digest is over the parsed descriptor."""
    reformatted = json.dumps(json.loads(DESCRIPTOR_BYTES), indent=7, sort_keys=True).encode()
    assert slots_of({"uses": {"p": {"contract": "pc.json"}}}, {"pc.json": reformatted}) == ("p",)


@pytest.mark.parametrize(
    ("manifest", "reason"),
    [
        ([1], "must be a mapping, got an array"),
        ({"uses": ["project"]}, "/uses must be a mapping"),
        ({"uses": {"Project": {"contract": "pc.json"}}}, "not a LocalName"),
        ({"uses": {"project": "pc.json"}}, "string 'contract' path"),
        ({"uses": {"project": {"contract": "/etc/pc.json"}}}, "must be relative"),
        ({"uses": {"project": {"contract": "a/../../pc.json"}}}, "escapes the package"),
        ({"uses": {"project": {"contract": "a\\pc.json"}}}, "backslash"),
        ({"uses": {"project": {"contract": ""}}}, "empty"),
    ],
)
def test_malformed_uses_entries_are_refused(manifest: object, reason: str) -> None:
    """Each malformed manifest shape is refused with a precise reason."""
    with pytest.raises(ManifestError, match=reason):
        slots_of(manifest)


def test_a_copy_with_duplicate_keys_is_refused() -> None:
    """A descriptor copy with duplicate keys is ambiguous and refused."""
    with pytest.raises(ManifestError, match="duplicate key 'id'"):
        slots_of({"uses": {"p": {"contract": "pc.json"}}}, {"pc.json": b'{"id": 1, "id": 2}'})


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
