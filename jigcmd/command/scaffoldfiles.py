"""What `jigcmd init` writes under `DIR/.jig/`: the Binding, in its format, and its Flow package."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path

import msgspec

from jigcmd.command.scaffold import Scaffold, ScaffoldError
from jigcmd.contract import CONTRACT_DIGEST
from jigcmd.jsonio import strict
from jigcmd.policy.digests import descriptor_digest

__all__ = [
    "COMPANIONS",
    "DESCRIPTOR_NAME",
    "WRITERS",
    "binding_toml",
    "binding_ts",
    "flow_manifest",
    "jig_ts",
    "shipped_descriptor",
    "write_scaffold",
]

DESCRIPTOR_NAME = "project-command.capability.json"


def shipped_descriptor() -> bytes:
    """The contract's descriptor shipped in jigcmd, checked to be the exact copy."""
    data = (resources.files("jigcmd") / "contracts" / DESCRIPTOR_NAME).read_bytes()
    digest = descriptor_digest(strict.loads(data))
    if digest != CONTRACT_DIGEST:
        raise ScaffoldError(
            f"jigcmd's own copy of the descriptor is damaged (digest {digest}, expected "
            f"{CONTRACT_DIGEST}); reinstall jigcmd"
        )
    return data


def flow_manifest(name: str, binding: str = "binding.toml") -> str:
    """FLOW.md: the package declares the Project Command capability in slot `command`."""
    return (
        f"---\nname: flows/{name}\nuses:\n  command:\n"
        f"    contract: ./contracts/{DESCRIPTOR_NAME}\n---\n\n# {name}\n\n"
        "The Flow package of this project's reviewed commands (made by `jigcmd init`). It\n"
        "declares the Project Command capability in slot `command`; the Binding\n"
        f"(`../../{binding}`) grants the commands.\n"
    )


def _string(text: str) -> str:
    # A JSON string of printable ASCII is a TOML basic string.
    return msgspec.json.encode(text).decode()


def binding_toml(scaffold: Scaffold, project: Path) -> str:
    """The Binding as TOML: the package, then one table per command."""
    lines = [
        f"# The reviewed commands for {project}, found there by `jigcmd init`.",
        "# Review them (and edit them), then admit them with `jigcmd lock --binding <this file>`.",
        f"package = {_string('flows/' + scaffold.name)}",
    ]
    for command, (kind, paths) in scaffold.commands.items():
        lines += ["", f"[commands.{command}]"]
        if kind == "run":
            lines.append(f"run = {_string(paths[0])}")
        else:
            lines += ["test = [", *(f"    {_string(p)}," for p in paths), "]"]
    return "\n".join(lines) + "\n"


def binding_ts(scaffold: Scaffold, project: Path) -> str:
    """The Binding as the reference writes it: `export default defineBinding({...})`."""
    lines = [
        f"// The reviewed commands for {project}, found there by `jigcmd init`.",
        "// Review them (and edit them), then admit them with `jigcmd lock --binding <this file>`.",
        "import { defineBinding } from '@jigging/jig'",
        "",
        "export default defineBinding({",
        f"  package: {_string('flows/' + scaffold.name)},",
        "  commands: {",
    ]
    for command, (kind, paths) in scaffold.commands.items():
        if kind == "run":
            lines.append(f"    {_string(command)}: {{ run: {_string(paths[0])} }},")
        else:
            lines += [
                f"    {_string(command)}: {{",
                "      test: [",
                *(f"        {_string(p)}," for p in paths),
                "      ],",
                "    },",
            ]
    lines += ["  },", "})"]
    return "\n".join(lines) + "\n"


def jig_ts(scaffold: Scaffold) -> str:
    """The project's `jig.ts`: its Flows and its Bindings, discovered."""
    return (
        "import { defineJig, discover } from '@jigging/jig'\n\n"
        "export default defineJig({\n"
        "  flows: discover('./flows'),\n"
        "  bindings: discover('./bindings'),\n"
        "})\n"
    )


# Binding format -> (the file's name, its writer); a format is one entry here.
WRITERS: dict[str, tuple[str, Callable[[Scaffold, Path], str]]] = {
    "toml": ("binding.toml", binding_toml),
    "ts": ("bindings/command.ts", binding_ts),
}
# Binding format -> the files written beside the Binding (name -> writer).
COMPANIONS: dict[str, dict[str, Callable[[Scaffold], str]]] = {"ts": {"jig.ts": jig_ts}}


def write_scaffold(
    target: Path, scaffold: Scaffold, project: Path, binding_format: str = "toml"
) -> Path:
    """Write the Binding and its Flow package under `target`; the Binding's path.

    Nothing is written when any of the files exists (`ScaffoldError` names each one).
    """
    file_name, writer = WRITERS[binding_format]
    package = target / "flows" / scaffold.name
    contents = {
        target / file_name: writer(scaffold, project).encode("utf-8"),
        **{
            target / name: companion(scaffold).encode("utf-8")
            for name, companion in COMPANIONS.get(binding_format, {}).items()
        },
        package / "FLOW.md": flow_manifest(scaffold.name, file_name).encode("utf-8"),
        package / "contracts" / DESCRIPTOR_NAME: shipped_descriptor(),
    }
    existing = [str(path) for path in contents if path.exists() or path.is_symlink()]
    if existing:
        raise ScaffoldError(
            f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; "
            "jigcmd init overwrites nothing (move them aside, or edit the Binding there)"
        )
    written: list[Path] = []
    try:
        for path, data in contents.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "xb") as handle:
                written.append(path)
                handle.write(data)
    except OSError as exc:
        for path in written:
            path.unlink(missing_ok=True)
        raise ScaffoldError(f"{exc.filename}: cannot be written: {exc.strerror}") from exc
    return target / file_name
