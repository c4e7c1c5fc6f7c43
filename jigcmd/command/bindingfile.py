"""Reading a Binding from disk: the file, its package directory, the manifest, the descriptors.

`jigcmd.policy` decides on the bytes (`parse_binding_file`, `parse_manifest`); this module only
finds and reads them, and keeps a descriptor copy's path from resolving out of its package.
A TypeScript Binding (`.ts`, `.js`) is evaluated first (`jigcmd.command.scriptbinding`); its
`package` is relative to its project's root, the directory of `jig.ts` when the Binding sits
in that project's `bindings/`, else the Binding's own directory (as for TOML and JSON).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jigcmd.policy.binding import (
    Binding,
    BindingError,
    parse_binding,
    parse_binding_file,
    require_declared,
)
from jigcmd.policy.bindingscript import JIG_NAMES, SCRIPT_SUFFIXES, Evaluated
from jigcmd.policy.digests import sha256_text
from jigcmd.policy.manifest import MANIFEST_NAMES, ManifestError, parse_manifest

__all__ = [
    "DeclaredCapability",
    "LoadedBinding",
    "ScriptResult",
    "is_script",
    "load_binding",
    "project_root",
    "read_manifest",
]


def is_script(path: Path) -> bool:
    """Whether the Binding is TypeScript or JavaScript, evaluated rather than decoded."""
    return path.suffix in SCRIPT_SUFFIXES


def project_root(path: Path) -> Path:
    """A script Binding's project root: `jig.ts`'s directory above `bindings/`, else its own."""
    # Absolute first: a relative `command.ts` has `.` for its parent, not `bindings`.
    directory = path.absolute().parent
    for root in (directory.parent, directory) if directory.name == "bindings" else (directory,):
        if any((root / name).is_file() for name in JIG_NAMES):
            return root
    return directory


@dataclass(frozen=True)
class ScriptResult:
    """A script Binding's evaluation: what its definers yielded and the bytes' digest."""

    evaluated: Evaluated
    digest: str
    root: Path


@dataclass(frozen=True)
class DeclaredCapability:
    """What a package directory declares: its manifest (if any) and the Project Command slots."""

    manifest: Path | None
    slots: tuple[str, ...]
    # The contract files (descriptor copies) the manifest names, as they were read.
    contracts: tuple[Path, ...] = ()


@dataclass(frozen=True)
class LoadedBinding:
    """A Binding read from disk, with its resolved package directory and capability slots."""

    path: Path
    binding: Binding
    package_dir: Path
    manifest: Path | None
    slots: tuple[str, ...]
    # The SHA-256 of the file's bytes (for a script, of the bytes that were evaluated).
    digest: str = ""
    # Whether it was evaluated (TypeScript or JavaScript): its bytes are then its identity.
    script: bool = False
    # What it read in its package: each manifest name (one may appear) and the contracts.
    package_files: tuple[Path, ...] = ()


def load_binding(path: Path, script: ScriptResult | None = None) -> LoadedBinding:
    """Read a Binding (.toml, .json, or a `script` evaluated), validate it, check its manifest."""
    source = str(path)

    def fail(rule: str, reason: str, pointer: str = "") -> BindingError:
        return BindingError(reason, pointer=pointer, rule=rule, source=source)

    if is_script(path):
        if script is None:
            raise fail("binding-file", "a TypeScript Binding must be evaluated first")
        binding = parse_binding(script.evaluated.binding, source=source)
        base, digest = script.root, script.digest
    else:
        try:
            data = path.read_bytes()
        except IsADirectoryError:
            raise fail("binding-file", _a_directory(path)) from None
        except OSError as exc:
            raise fail("binding-file", f"cannot be read: {exc.strerror}") from exc
        binding = parse_binding_file(data, suffix=path.suffix, source=source)
        base, digest = path.parent, sha256_text(data)
    package_dir = (base / binding.package).resolve()
    if not package_dir.is_dir():
        raise fail(
            "package",
            f"package directory {str(package_dir)!r} does not exist ({_PACKAGE_HELP})",
            "/package",
        )
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
        digest=digest,
        script=script is not None,
        package_files=(*(package_dir / name for name in MANIFEST_NAMES), *declared.contracts),
    )


# What `package` names, and where writing one is told.
_PACKAGE_HELP = (
    "`package` is the Flow package's directory, relative to the Binding, holding FLOW.md and "
    "the contract's descriptor copy: docs/binding.md#writing-one-by-hand"
)
# Where `init` puts a Binding inside a project, in either format.
_INSIDE = (".jig/binding.toml", ".jig/bindings/command.ts", "binding.toml")


def _a_directory(path: Path) -> str:
    """What `--binding DIR` means to say: the Binding's file, the one inside DIR if any."""
    found = next((path / name for name in _INSIDE if (path / name).is_file()), None)
    example = f", e.g. {found}" if found is not None else ""
    return f"a directory: --binding names the Binding's file{example}"


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
    contracts: list[Path] = []

    def read_contract(relative: str) -> bytes:
        target = (root / relative).resolve()
        # Resolving follows symlinks, so a link pointing outside the package is caught here.
        if not target.is_relative_to(root):
            raise ManifestError(f"{source}: contract {relative!r} resolves outside {root}")
        contracts.append(target)
        try:
            return target.read_bytes()
        except OSError as exc:
            raise ManifestError(
                f"{source}: contract {relative!r} cannot be read: {exc.strerror}"
            ) from exc

    slots = parse_manifest(name, data, read_contract, source=source)
    return DeclaredCapability(manifest=path, slots=slots, contracts=tuple(contracts))
