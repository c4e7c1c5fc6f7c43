"""Where Bun looks for a bare specifier a tsconfig.json's `paths` or `baseUrl` maps. Pure.

Bun reads the tsconfig.json (else jsconfig.json) nearest above the importing file, with the
files it `extends`, and maps a bare specifier by `compilerOptions.paths` (a key equal to it,
else the pattern whose text before its `*` is longest; each substitution in turn), then by
`baseUrl`, before it looks in node_modules/. A substitution is relative to `baseUrl` when one
is set, else to the file that sets `paths`; `baseUrl` is relative to the file setting it; a
file's own setting outranks the ones it extends. A config jigcmd cannot read (not JSON, an
`extends` of a package or of a file the candidate lacks) is `Unknown`, with why: what a
bare specifier under it loads is not known.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from jigcmd.jsonio import strict
from jigcmd.policy.relaxedjson import load_relaxed

__all__ = ["CONFIGS", "Aliases", "Unknown", "config_files"]

# The files Bun takes a directory's mapping from, the first one found.
CONFIGS = ("tsconfig.json", "jsconfig.json")
# How deep a chain of `extends` is followed (a loop would be endless).
_MAX_EXTENDS = 16
# How many files one walk of `extends` reads: each is read once a walk (an `extends` array
# naming a file again, or a loop, would otherwise be walked exponentially: 3 names, 16 deep,
# is 43 M layers), and a chain this wide is no project's.
_MAX_LAYERS = 64
# How many `paths` keys are read: each specifier is matched against all (projects map a
# few; a candidate's worth of keys and of specifiers would take minutes).
_MAX_KEYS = 256


@dataclass(frozen=True)
class Unknown:
    """A config whose mapping jigcmd cannot read, and why, in words."""

    config: str
    why: str


@dataclass(frozen=True)
class _Mapping:
    """A config's mapping, its `extends` applied: keys to substitutions, and directories."""

    paths: Mapping[str, tuple[str, ...]]
    paths_base: str  # what the substitutions are relative to ("" for the candidate's root)
    base_url: str | None


# One file's `compilerOptions` with the file, or why a file it extends cannot be read.
_Layer = tuple[str, Mapping[str, object]] | Unknown


def config_files(files: Mapping[str, str]) -> set[str]:
    """Every config of `files` Bun may read a mapping from, and the candidate files each
    `extends`: what a subset of the candidate must keep for `Aliases` to read it the same."""
    aliases = Aliases(files)
    found: set[str] = set()
    for config in (path for path in files if posixpath.basename(path) in CONFIGS):
        layers = aliases._layers(config, 0, set())
        found.update(layer[0] for layer in layers if not isinstance(layer, Unknown))
    return found


class Aliases:
    """The mappings of the configs in a candidate's files, each read once when first used."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self._files = files
        self._read: dict[str, _Mapping | Unknown] = {}
        self._nearest: dict[str, str | None] = {}

    def targets(self, importer: str, specifier: str) -> tuple[str, ...] | Unknown:
        """The paths (before Bun adds an extension) a bare `specifier` in `importer` may
        name, in the order Bun tries them; `Unknown` when its config cannot be read."""
        config = self._config_for(posixpath.dirname(importer))
        if config is None:
            return ()
        if config not in self._read:
            self._read[config] = self._mapping(config)
        mapping = self._read[config]
        if isinstance(mapping, Unknown):
            return mapping
        found = [_join(mapping.paths_base, sub) for sub in _substitutions(mapping, specifier)]
        if mapping.base_url is not None:
            found.append(_join(mapping.base_url, specifier))
        return tuple(path for path in found if path is not None)

    def _config_for(self, directory: str) -> str | None:
        """The config governing the files of `directory`: its own, else its parent's."""
        if directory not in self._nearest:
            own = (posixpath.join(directory, name) for name in CONFIGS)
            config = next((path for path in own if path in self._files), None)
            if config is None and directory:
                config = self._config_for(posixpath.dirname(directory))
            self._nearest[directory] = config
        return self._nearest[directory]

    def _mapping(self, config: str) -> _Mapping | Unknown:
        """`config`'s `paths` and `baseUrl`, each from the first file in the chain setting it."""
        chosen: dict[str, tuple[str, object]] = {}
        for layer in self._layers(config, 0, set()):
            if len(chosen) == 2:
                break
            if isinstance(layer, Unknown):
                return layer  # it may set what the files before it leave unset
            path, options = layer
            for key in ("paths", "baseUrl"):
                if key in options and key not in chosen:
                    chosen[key] = (path, options[key])
        base_url = None
        setter, value = chosen.get("baseUrl", (config, None))
        if isinstance(value, str):
            base_url = _directory(posixpath.join(posixpath.dirname(setter), value))
        setter, value = chosen.get("paths", (config, None))
        paths_base = base_url if base_url is not None else posixpath.dirname(setter)
        paths = _read_paths(value)
        if len(paths) > _MAX_KEYS:
            return Unknown(setter, f"{setter} maps more than {_MAX_KEYS} `paths` keys")
        return _Mapping(paths, paths_base, base_url)

    def _layers(self, config: str, depth: int, seen: set[str]) -> Iterator[_Layer]:
        """`config`'s `compilerOptions`, then those of what it extends, the last extended
        first (as TypeScript and Bun rank them); an `Unknown` where the chain is lost.

        `seen`, the files this walk has read: a file met again is skipped, as its first
        layer already outranks the later one it would give."""
        if config in seen:
            return
        if len(seen) >= _MAX_LAYERS:
            why = f"{config} is past the {_MAX_LAYERS} files a chain of `extends` may hold"
            yield Unknown(config, why)
            return
        seen.add(config)
        try:
            value = load_relaxed(self._files[config])
        except strict.StrictJSONError:
            yield Unknown(config, f"{config} is not the JSON jigcmd reads")
            return
        if not isinstance(value, dict):
            yield Unknown(config, f"{config} holds no object")
            return
        options = value.get("compilerOptions")
        yield config, options if isinstance(options, dict) else {}
        extends = value.get("extends")
        bases = [extends] if isinstance(extends, str) else extends
        for base in reversed(bases if isinstance(bases, list) else []):
            if not isinstance(base, str):
                continue
            found = self._extended(config, base)
            if isinstance(found, Unknown):
                yield found
            elif depth >= _MAX_EXTENDS:
                yield Unknown(config, f"{config} extends more than {_MAX_EXTENDS} files deep")
            else:
                yield from self._layers(found, depth + 1, seen)

    def _extended(self, config: str, base: str) -> str | Unknown:
        """The candidate file `config`'s `extends` names by `base`."""
        said = f"{config} extends {base}"
        if not base.startswith(("./", "../")):
            return Unknown(config, f"{said}, from node_modules/, which is never sent")
        path = posixpath.normpath(posixpath.join(posixpath.dirname(config), base))
        for name in (path, path + ".json"):
            if name in self._files:
                return name
        return Unknown(config, f"{said}, a file the candidate does not hold")


def _read_paths(value: object) -> dict[str, tuple[str, ...]]:
    """`compilerOptions.paths`, its entries that are a key and a list of strings."""
    if not isinstance(value, dict):
        return {}
    return {
        str(key): tuple(sub for sub in subs if isinstance(sub, str))
        for key, subs in value.items()
        if isinstance(subs, list)
    }


def _substitutions(mapping: _Mapping, specifier: str) -> tuple[str, ...]:
    """The substitutions `specifier` takes: a key equal to it, else the one-`*` pattern
    matching it with the longest text before the `*`, its `*` put in each."""
    if specifier in mapping.paths:
        return mapping.paths[specifier]
    best: tuple[int, str, str] | None = None  # (prefix length, the `*`'s text, key)
    for key in mapping.paths:
        prefix, star, suffix = key.partition("*")
        if not star or "*" in suffix or len(specifier) < len(prefix) + len(suffix):
            continue
        longer = best is None or len(prefix) > best[0]
        if longer and specifier.startswith(prefix) and specifier.endswith(suffix):
            best = (len(prefix), specifier[len(prefix) : len(specifier) - len(suffix)], key)
    if best is None:
        return ()
    _, matched, key = best
    return tuple(sub.replace("*", matched, 1) for sub in mapping.paths[key])


def _directory(path: str) -> str:
    """A directory as a candidate path: "" for the root."""
    normal = posixpath.normpath(path)
    return "" if normal == "." else normal


def _join(directory: str, relative: str) -> str | None:
    """`relative` below `directory`, as a candidate path; None outside the candidate."""
    path = posixpath.normpath(posixpath.join(directory, relative))
    if path == ".." or path.startswith(("../", "/")):
        return None
    return path
