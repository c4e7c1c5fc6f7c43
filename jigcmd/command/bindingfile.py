"""Reading a Binding from disk: the file, its package directory, the manifest, the descriptors.

`jigcmd.policy` decides on the bytes (`parse_binding_file`, `parse_manifest`); this module only
finds and reads them, and keeps a descriptor copy's path from resolving out of its package.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jigcmd.policy.binding import (
    Binding,
    BindingError,
    parse_binding_file,
    require_declared,
)
from jigcmd.policy.manifest import MANIFEST_NAMES, ManifestError, parse_manifest

__all__ = ["DeclaredCapability", "LoadedBinding", "load_binding", "read_manifest"]


@dataclass(frozen=True)
class DeclaredCapability:
    """What a package directory declares: its manifest (if any) and the Project Command slots."""

    manifest: Path | None
    slots: tuple[str, ...]


@dataclass(frozen=True)
class LoadedBinding:
    """A Binding read from disk, with its resolved package directory and capability slots."""

    path: Path
    binding: Binding
    package_dir: Path
    manifest: Path | None
    slots: tuple[str, ...]


def load_binding(path: Path) -> LoadedBinding:
    """Read a Binding file (.toml or .json), validate it and check the package's manifest."""
    source = str(path)

    def fail(rule: str, reason: str, pointer: str = "") -> BindingError:
        return BindingError(reason, pointer=pointer, rule=rule, source=source)

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise fail("binding-file", f"cannot be read: {exc.strerror}") from exc
    binding = parse_binding_file(data, suffix=path.suffix, source=source)
    package_dir = (path.parent / binding.package).resolve()
    if not package_dir.is_dir():
        raise fail("package", f"package directory {str(package_dir)!r} does not exist", "/package")
    try:
        declared = read_manifest(package_dir)
    except ManifestError as exc:
        raise fail("manifest", f"package manifest is invalid: {exc}", "/package") from exc
    require_declared(
        binding,
        declared.slots,
        manifest=None if declared.manifest is None else str(declared.manifest),
        package_dir=str(package_dir),
        source=source,
    )
    return LoadedBinding(
        path=path,
        binding=binding,
        package_dir=package_dir,
        manifest=declared.manifest,
        slots=declared.slots,
    )


def read_manifest(package_dir: Path) -> DeclaredCapability:
    """Read a package directory's manifest and return the slots declaring the capability."""
    for name in MANIFEST_NAMES:
        path = package_dir / name
        if path.is_file():
            break
    else:
        return DeclaredCapability(manifest=None, slots=())
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ManifestError(f"{source}: cannot be read: {exc.strerror}") from exc
    root = package_dir.resolve()

    def read_contract(relative: str) -> bytes:
        target = (root / relative).resolve()
        # Resolving follows symlinks, so a link pointing outside the package is caught here.
        if not target.is_relative_to(root):
            raise ManifestError(f"{source}: contract {relative!r} resolves outside {root}")
        try:
            return target.read_bytes()
        except OSError as exc:
            raise ManifestError(
                f"{source}: contract {relative!r} cannot be read: {exc.strerror}"
            ) from exc

    return DeclaredCapability(
        manifest=path, slots=parse_manifest(name, data, read_contract, source=source)
    )
