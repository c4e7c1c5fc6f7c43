"""The package manifest: which slots declare the Project Command capability.

A package declares capabilities in `FLOW.md` YAML front matter or in `flow.meta.json` as
`uses: {<slot>: {contract: <relative path to an exact descriptor copy>}}`. A slot declares
the Project Command capability only when its copy has the contract's ID, version and digest.
`FLOW.md` is read when both files exist.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import PurePosixPath

import yaml

from jigcmd.contract import CONTRACT_DIGEST, CONTRACT_ID, CONTRACT_VERSION
from jigcmd.jsonio import strict
from jigcmd.jsonio.canonical import CanonicalError
from jigcmd.policy.digests import descriptor_digest
from jigcmd.policy.paths import is_local_name
from jigcmd.policy.pointers import kind

__all__ = [
    "MANIFEST_NAMES",
    "ManifestError",
    "capability_slots",
    "parse_front_matter",
    "parse_json_object",
    "parse_manifest",
]

MANIFEST_NAMES = ("FLOW.md", "flow.meta.json")

_FENCE = "---"
_YAML_END = {"---", "..."}


class ManifestError(ValueError):
    """Raised when a package manifest or a descriptor copy it names is unreadable or inexact."""


def parse_front_matter(text: str, *, source: str) -> object:
    """Return the YAML front matter of a FLOW.md text (None when it has none)."""
    lines = text.removeprefix("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != _FENCE:
        return None
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip() in _YAML_END:
            block = "\n".join(lines[1:index])
            break
    else:
        raise ManifestError(f"{source}: front matter opened with '---' is never closed")
    try:
        return yaml.safe_load(block)
    except yaml.YAMLError as exc:
        raise ManifestError(
            f"{source}: front matter is not valid YAML: {_yaml_problem(exc)}"
        ) from exc


def _yaml_problem(error: yaml.YAMLError) -> str:
    """PyYAML's finding on one line: what, and where in the file (not its caret drawing)."""
    if not isinstance(error, yaml.MarkedYAMLError) or error.problem is None:
        found = str(error)
    else:
        found = f"{error.problem}{_at(error.problem_mark)}"
        if error.context is not None:
            found = f"{error.context}{_at(error.context_mark)}: {found}"
    return " ".join(found.split())


def _at(mark: yaml.Mark | None) -> str:
    # A mark counts from 0 in the front matter, which starts on the file's second line.
    return "" if mark is None else f" (line {mark.line + 2}, column {mark.column + 1})"


def parse_json_object(data: bytes, *, source: str) -> object:
    """Parse strict JSON/1 text, refusing duplicate keys, which would make the meaning ambiguous."""
    try:
        return strict.loads(data)
    except strict.DuplicateKey as exc:
        raise ManifestError(f"{source}: duplicate key {exc.key!r}") from None
    except strict.StrictJSONError as exc:
        raise ManifestError(f"{source}: not valid JSON: {exc}") from exc


def capability_slots(
    manifest: object, read_contract: Callable[[str], bytes], *, source: str
) -> tuple[str, ...]:
    """Return the slots whose `uses` entry names an exact Project Command descriptor copy.

    `read_contract` returns the bytes of a contract path relative to the package directory.
    Slots that use another contract are not ours and are skipped; a copy that claims our ID
    but is not exact is an error, because a near-miss is a mistake worth hearing about.
    """
    if manifest is None:
        return ()
    if not isinstance(manifest, dict):
        raise ManifestError(f"{source}: the manifest must be a mapping, got {kind(manifest)}")
    uses = manifest.get("uses")
    if uses is None:
        return ()
    if not isinstance(uses, dict):
        raise ManifestError(f"{source}: /uses must be a mapping of slot names, got {kind(uses)}")
    slots: list[str] = []
    for slot, entry in uses.items():
        where = f"{source}: /uses/{slot}"
        if not isinstance(slot, str) or not is_local_name(slot):
            raise ManifestError(f"{where}: slot name {slot!r} is not a LocalName")
        if not isinstance(entry, dict) or not isinstance(entry.get("contract"), str):
            raise ManifestError(f"{where}: must be a mapping with a string 'contract' path")
        contract = entry["contract"]
        problem = _contract_path_problem(contract)
        if problem is not None:
            raise ManifestError(f"{where}/contract: {problem}")
        descriptor = parse_json_object(read_contract(contract), source=f"{where}/contract")
        if _is_project_command(descriptor, contract, where):
            slots.append(slot)
    return tuple(slots)


def _is_project_command(descriptor: object, contract: str, where: str) -> bool:
    if not isinstance(descriptor, dict):
        raise ManifestError(f"{where}/contract: {contract} is not a JSON object")
    if descriptor.get("id") != CONTRACT_ID:
        return False
    version = descriptor.get("version")
    if version != CONTRACT_VERSION:
        raise ManifestError(
            f"{where}/contract: {contract} has id {CONTRACT_ID} but version {version!r} "
            f"(jigcmd implements {CONTRACT_VERSION})"
        )
    try:
        digest = descriptor_digest(descriptor)
    except CanonicalError as exc:
        raise ManifestError(f"{where}/contract: {contract} cannot be digested: {exc}") from exc
    if digest != CONTRACT_DIGEST:
        raise ManifestError(
            f"{where}/contract: {contract} is not an exact copy of the descriptor "
            f"(digest {digest}, expected {CONTRACT_DIGEST})"
        )
    return True


def _contract_path_problem(contract: str) -> str | None:
    if not contract:
        return "contract path is empty"
    if "\\" in contract or "\x00" in contract:
        return f"contract path {contract!r} contains a backslash or NUL"
    pure = PurePosixPath(contract)
    if pure.is_absolute():
        return f"contract path {contract!r} must be relative to the package directory"
    depth = 0
    for part in pure.parts:
        depth += -1 if part == ".." else 1
        if depth < 0:
            return f"contract path {contract!r} escapes the package directory"
    return None


def parse_manifest(
    name: str, data: bytes, read_contract: Callable[[str], bytes], *, source: str
) -> tuple[str, ...]:
    """The slots a manifest's bytes declare; `name` is one of `MANIFEST_NAMES`.

    `read_contract` returns the bytes of a contract path relative to the package directory.
    """
    if name == "FLOW.md":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ManifestError(f"{source}: not UTF-8: {exc}") from exc
        manifest = parse_front_matter(text, source=source)
    else:
        manifest = parse_json_object(data, source=source)
    return capability_slots(manifest, read_contract, source=source)
