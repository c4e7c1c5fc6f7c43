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
    parse_manifest,
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


def test_a_flow_md_manifest_is_read_from_its_front_matter() -> None:
    """FLOW.md bytes: the slots its YAML front matter declares."""
    data = b"---\nuses:\n  proj:\n    contract: pc.json\n---\n# Demo\n"
    files = {"pc.json": DESCRIPTOR_BYTES}
    assert parse_manifest("FLOW.md", data, contracts(files), source="FLOW.md") == ("proj",)


def test_a_flow_meta_json_manifest_is_strict_json() -> None:
    """flow.meta.json bytes: strict JSON, a repeated key refused."""
    data = b'{"uses": {"project": {"contract": "pc.json"}}}'
    files = {"pc.json": DESCRIPTOR_BYTES}
    assert parse_manifest("flow.meta.json", data, contracts(files), source="m") == ("project",)
    with pytest.raises(ManifestError, match=r"^m: duplicate key 'uses'$"):
        parse_manifest("flow.meta.json", b'{"uses": {}, "uses": {}}', contracts({}), source="m")


def test_a_flow_md_that_is_not_utf8_is_refused() -> None:
    """FLOW.md must be UTF-8 text."""
    with pytest.raises(ManifestError, match=r"^FLOW\.md: not UTF-8"):
        parse_manifest("FLOW.md", b"---\n\xff\n---\n", contracts({}), source="FLOW.md")
