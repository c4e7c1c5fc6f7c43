"""`jigcmd init`'s Binding for a person's own project: found in the project, written beside it.

The reviewed commands come from the candidate the directory sends (`projectdir.py`): a
`tests` command for its `*.test.ts` / `*.spec.ts` files (`tests-2`, … past 16, the Binding's
limit per command) and a `start` command for the entry point `package.json` names
(`module`, else `main`). Everything goes to `DIR/.jig/` (reserved, so never part of a
candidate): the Binding, and the Flow package it names with its manifest and the exact copy
of the contract's descriptor shipped inside jigcmd, its digest checked before it is copied.
Each Binding format is one small writer (`WRITERS`, with the files it needs beside it in
`COMPANIONS`): TOML, or TypeScript as the reference lays a project out (`bindings/command.ts`
with `defineBinding`, and a `jig.ts` discovering `./flows` and `./bindings`). Nothing that
exists is overwritten.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import msgspec

from jigcmd.command.projectdir import ProjectFiles
from jigcmd.contract import CONTRACT_DIGEST, LOCAL_NAME_MAX_CHARS
from jigcmd.jsonio import strict
from jigcmd.policy.binding import MAX_COMMANDS, MAX_TEST_PATHS, TEST_PATH_PATTERN
from jigcmd.policy.digests import descriptor_digest
from jigcmd.policy.paths import is_local_name, path_problem

__all__ = [
    "COMPANIONS",
    "DESCRIPTOR_NAME",
    "WRITERS",
    "Scaffold",
    "ScaffoldError",
    "binding_toml",
    "binding_ts",
    "flow_manifest",
    "jig_ts",
    "plan_scaffold",
    "shipped_descriptor",
    "write_scaffold",
]

DESCRIPTOR_NAME = "project-command.capability.json"
_TEST_PATH = re.compile(TEST_PATH_PATTERN)
_RUN_PATH = re.compile(r"\.(ts|js)\Z")


class ScaffoldError(ValueError):
    """Raised when no Binding can be made for a project (nothing to review, a file exists)."""


@dataclass(frozen=True)
class Scaffold:
    """What `init` writes: the package's name and the commands, each `run` or `test` paths."""

    name: str
    commands: Mapping[str, tuple[str, tuple[str, ...]]]  # name -> ("run" | "test", paths)

    def needed(self) -> tuple[str, ...]:
        """Every file the commands name: the candidate must send them."""
        return tuple(path for _, paths in self.commands.values() for path in paths)


def plan_scaffold(project: ProjectFiles, name: str | None = None) -> Scaffold:
    """The commands found in `project`'s candidate; `ScaffoldError` when there are none."""
    manifest = _package_json(project.files.get("package.json"))
    tests = sorted(p for p in project.files if _TEST_PATH.search(p) and path_problem(p) is None)
    commands: dict[str, tuple[str, tuple[str, ...]]] = {}
    for index in range(0, len(tests), MAX_TEST_PATHS):
        key = "tests" if index == 0 else f"tests-{index // MAX_TEST_PATHS + 1}"
        commands[key] = ("test", tuple(tests[index : index + MAX_TEST_PATHS]))
    entry = _entry_point(manifest, project)
    if entry is not None:
        commands["start"] = ("run", (entry,))
    if not commands:
        raise ScaffoldError(
            f"{project.root}: no test files (*.test.ts, *.spec.ts, *.test.js, *.spec.js) and "
            'no entry point (package.json "module" or "main") among the files it sends; '
            "nothing to review (write the Binding by hand: docs/binding.md)"
        )
    if len(commands) > MAX_COMMANDS:
        raise ScaffoldError(
            f"{project.root}: {len(tests)} test files need {len(commands)} commands, more than "
            f"a Binding's {MAX_COMMANDS}; leave some out with --exclude GLOB"
        )
    chosen = name if name is not None else _local_name(manifest.get("name"), project.root.name)
    if not is_local_name(chosen):
        raise ScaffoldError(
            f"--name {chosen!r}: a package name is lowercase words joined by single hyphens"
        )
    return Scaffold(chosen, commands)


def _package_json(text: str | None) -> dict[str, object]:
    if text is None:
        return {}
    try:
        value = strict.loads(text.encode("utf-8"))
    except strict.StrictJSONError:
        return {}  # not ours to judge: Bun reads it, and says so if it must
    return value if isinstance(value, dict) else {}


def _entry_point(manifest: Mapping[str, object], project: ProjectFiles) -> str | None:
    for key in ("module", "main"):
        value = manifest.get(key)
        if isinstance(value, str):
            path = value.removeprefix("./")
            if path in project.files and _RUN_PATH.search(path) and path_problem(path) is None:
                return path
    return None


def _local_name(*candidates: object) -> str:
    """The first of `candidates` made a LocalName (`@scope/My_App` → `my-app`)."""
    for raw in candidates:
        if isinstance(raw, str):
            base = raw.rsplit("/", 1)[-1].lower()
            words = re.findall(r"[a-z0-9]+", base)
            name = "-".join(words)[:LOCAL_NAME_MAX_CHARS].strip("-")
            if is_local_name(name):
                return name
    return "project"


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
