"""What plain Bun would do with a project that Bun under jigcmd does not, said before it matters.

Bun runs with a fixed posture (`planner.BUN_FLAGS`): no `bunfig.toml`, no `.env`, no
install, no network. A project that counts on its `bunfig.toml` (a `[test] preload`) or on
its installed `dependencies` fails differently under jigcmd than under bare `bun test`, and
before these notes nothing said why. Each function takes the candidate's files (path →
text) and returns the sentences `init` and `run` print on stderr; none is a refusal (the
candidate may not need what is missing). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from jigcmd.jsonio import strict

__all__ = ["BUNFIG", "posture_notes"]

BUNFIG = "bunfig.toml"
# The package.json fields whose packages `bun install` would put in node_modules/.
_DEPENDENCY_FIELDS = ("dependencies", "devDependencies", "peerDependencies", "optionalDependencies")


def bunfig_note(files: Mapping[str, str]) -> str | None:
    """The sentence for a `bunfig.toml` at the candidate's root, which Bun will not read."""
    if BUNFIG not in files:
        return None
    preload = "its [test] preload is not loaded, " if "preload" in files[BUNFIG] else ""
    return (
        f"{BUNFIG}: Bun runs without it (jigcmd gives Bun --config=/dev/null, so no project "
        f"can change Bun's own options): {preload}and its other settings do not apply; import "
        "the setup from the test files that need it (docs/binding.md#what-bun-runs-with)"
    )


def dependencies_note(files: Mapping[str, str]) -> str | None:
    """The sentence for the packages the candidate's package.json files declare, which will
    not be there: each comes from node_modules/, never sent, and nothing installs it."""
    external, workspace = _declared(files)
    if not external and not workspace:
        return None
    parts = []
    if external:
        parts.append(f"{_count(len(external), 'dependency', 'dependencies')} ({_some(external)})")
    if workspace:
        parts.append(
            f"{_count(len(workspace), 'workspace package', 'workspace packages')} "
            f"({_some(workspace)})"
        )
    return (
        f"package.json declares {' and '.join(parts)}: none is installed when a command runs "
        "(node_modules/ is never sent, nothing is installed, there is no network), so an "
        "import by package name fails unless the candidate holds the source: vendor it into "
        "the project, map a workspace package to its source with tsconfig.json "
        '"compilerOptions.paths", or bundle (docs/binding.md#dependencies-and-workspaces)'
    )


def posture_notes(files: Mapping[str, str]) -> list[str]:
    """Every note that applies to the candidate `files`, in a fixed order."""
    return [note for note in (bunfig_note(files), dependencies_note(files)) if note is not None]


def _declared(files: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """The names every package.json in `files` declares: (from a registry, from the
    workspace), each sorted. `@types/*` are types only: Bun never imports them."""
    external: set[str] = set()
    workspace: set[str] = set()
    for path, text in files.items():
        if path != "package.json" and not path.endswith("/package.json"):
            continue
        try:
            manifest = strict.loads(text.encode("utf-8"))
        except strict.StrictJSONError:
            continue  # Bun reads it, and says what is wrong if it must
        if not isinstance(manifest, dict):
            continue
        for field in _DEPENDENCY_FIELDS:
            value = manifest.get(field)
            if not isinstance(value, dict):
                continue
            for name, version in value.items():
                if str(name).startswith("@types/"):
                    continue
                local = isinstance(version, str) and version.startswith("workspace:")
                (workspace if local else external).add(str(name))
    return sorted(external), sorted(workspace - external)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _some(names: list[str]) -> str:
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return ", ".join(names[:3]) + more
