"""The Binding: the operator's reviewed command policy for one package (spec-notes §3).

A Binding names a `package` directory and up to eight `commands`, each either `run` (one
entry script) or `test` (1-16 test files), and may carry the reference's Flow fields
`settings` and `slots` (`jigcmd.policy.bindingfields`): closed fields, nothing else. It is a
TOML or JSON file, or the JSON a TypeScript Binding's `defineBinding` call yields
(`jigcmd.policy.bindingscript`); every form meets the same rules. `parse_binding` applies every
rule and `parse_binding_file` decodes a file's bytes first, purely; `require_declared` refuses
commands for a package whose manifest declares no Project Command slot. Reading the files is
the caller's (`jigcmd.command.bindingfile`).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

import msgspec

from jigcmd.contract import LOCAL_NAME_MAX_CHARS, LOCAL_NAME_PATTERN, PATH_MAX_BYTES
from jigcmd.jsonio import strict
from jigcmd.jsonio.canonical import dumps
from jigcmd.policy import planner
from jigcmd.policy.bindingfields import parse_settings, parse_slots
from jigcmd.policy.digests import sha256_text
from jigcmd.policy.manifest import MANIFEST_NAMES
from jigcmd.policy.paths import is_local_name, path_problem, reserved_component
from jigcmd.policy.pointers import escape, kind

__all__ = [
    "BINDING_FIELDS",
    "BUN_SCRIPT_EXTENSIONS",
    "MAX_COMMANDS",
    "MAX_TEST_PATHS",
    "RUN_PATH_PATTERN",
    "RUN_RULE",
    "TEST_PATH_PATTERN",
    "TEST_RULE",
    "Binding",
    "BindingError",
    "CommandEntry",
    "CommandPolicy",
    "PolicyDocument",
    "bun_runs_as_test",
    "capability_error",
    "is_run_path",
    "is_test_path",
    "parse_binding",
    "parse_binding_file",
    "require_declared",
    "test_name_for",
]

MAX_COMMANDS = 8
# The closed set of a Binding's fields, in the order messages name them.
BINDING_FIELDS = ("package", "settings", "slots", "commands")
MAX_TEST_PATHS = 16

# The reference's rule (spec-notes §3): a run path ends in `.ts` or `.js`, a test path in
# `.test` or `.spec` and one of those. Bun runs more (`.tsx`, `.mts`, `_test`, ...): a Binding
# written here must be one the reference's own tools accept, so `init` names the files Bun
# would run that the rule leaves out (`bun_runs_as_test`), and the Binding keeps the rule.
RUN_PATH_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_./-]*\.(ts|js)$"
TEST_PATH_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_./-]*\.(test|spec)\.(ts|js)$"
_RUN_SUFFIX = re.compile(r"\.(ts|js)\Z")
_TEST_SUFFIX = re.compile(r"\.(test|spec)\.(ts|js)\Z")
# What bare `bun test` (Bun 1.4, measured with the bundled Bun) runs by its name: any file
# ending in `.test`, `_test`, `.spec` or `_spec`, then one of these, in any letter case.
BUN_SCRIPT_EXTENSIONS = ("ts", "tsx", "js", "jsx", "mts", "cts", "mjs", "cjs")
_BUN_TEST_NAME = re.compile(
    rf"[._](test|spec)\.({'|'.join(BUN_SCRIPT_EXTENSIONS)})\Z", re.IGNORECASE
)
# How the rules are worded in refusals and in `init`'s notes.
RUN_RULE = "a .ts or .js file (docs/binding.md)"
TEST_RULE = "a file whose name ends in .test.ts, .test.js, .spec.ts or .spec.js (docs/binding.md)"


def is_run_path(path: str) -> bool:
    """Whether `path`'s extension is a run path's (the path grammar aside)."""
    return _RUN_SUFFIX.search(path) is not None


def is_test_path(path: str) -> bool:
    """Whether `path`'s name is a test path's (the path grammar aside)."""
    return _TEST_SUFFIX.search(path) is not None


def bun_runs_as_test(path: str) -> bool:
    """Whether bare `bun test` would run `path` by its name (a Binding may still refuse it)."""
    return _BUN_TEST_NAME.search(path) is not None


def test_name_for(path: str) -> str | None:
    """The test path a Binding may name for a file bare `bun test` runs (`Foo.Test.tsx` →
    `Foo.test.ts`, `bar_spec.mjs` → `bar.spec.js`): its kind in lowercase after a dot, and
    .ts for a TypeScript extension, else .js. None for a name that already is one or that
    no rename of its ending makes one."""
    found = _BUN_TEST_NAME.search(path)
    if found is None or is_test_path(path):
        return None
    extension = "ts" if "t" in found.group(2).lower() else "js"
    renamed = f"{path[: found.start()]}.{found.group(1).lower()}.{extension}"
    return renamed if is_test_path(renamed) else None


_CommandName = Annotated[
    str, msgspec.Meta(pattern=LOCAL_NAME_PATTERN, max_length=LOCAL_NAME_MAX_CHARS)
]
_RunPath = Annotated[str, msgspec.Meta(pattern=RUN_PATH_PATTERN, max_length=PATH_MAX_BYTES)]
_TestPath = Annotated[str, msgspec.Meta(pattern=TEST_PATH_PATTERN, max_length=PATH_MAX_BYTES)]


class CommandEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One command as written in a Binding and pinned in a lock: exactly one of `run` or `test`."""

    run: _RunPath | msgspec.UnsetType = msgspec.UNSET
    test: (
        Annotated[tuple[_TestPath, ...], msgspec.Meta(min_length=1, max_length=MAX_TEST_PATHS)]
        | msgspec.UnsetType
    ) = msgspec.UNSET


_OneCommand = Annotated[
    CommandEntry, msgspec.Meta(extra_json_schema={"minProperties": 1, "maxProperties": 1})
]


class PolicyDocument(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The canonical form of a Binding: what the file says, and what a lock pins."""

    package: Annotated[str, msgspec.Meta(min_length=1)]
    commands: Annotated[dict[_CommandName, _OneCommand], msgspec.Meta(max_length=MAX_COMMANDS)] = {}
    # Absent when empty, so a Binding without them keeps the digest it always had.
    settings: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    slots: Annotated[dict[_CommandName, str], msgspec.Meta(max_length=256)] | msgspec.UnsetType = (
        msgspec.UNSET
    )


class CommandPolicy(msgspec.Struct, frozen=True):
    """One admitted command: its name, its kind and the candidate paths it runs."""

    name: str
    kind: Literal["run", "test"]
    paths: tuple[str, ...]

    @property
    def accepts_args(self) -> bool:
        """Whether callers may pass arguments (a `test` command accepts none)."""
        return self.kind == "run"

    def invocation(self, args: Sequence[str] = ()) -> list[str]:
        """The logical argv reported as evidence; no host paths and no posture flags."""
        if self.kind == "run":
            return ["bun", self.paths[0], *args]
        return ["bun", "test", *self.paths]

    def bun_argv(self, bun: str, args: Sequence[str] = ()) -> list[str]:
        """The argv actually executed (the planner's, so the review shows exactly what runs)."""
        return list(planner.bun_argv(bun, self.kind, self.paths, args))

    def entry(self) -> CommandEntry:
        """This command as a Binding entry."""
        if self.kind == "run":
            return CommandEntry(run=self.paths[0])
        return CommandEntry(test=self.paths)


class Binding(msgspec.Struct, frozen=True):
    """A validated Binding: the package directory (as written) and its admitted commands."""

    package: str
    commands: Mapping[str, CommandPolicy]
    settings: Mapping[str, Any] = {}
    slots: Mapping[str, str] = {}

    def document(self) -> PolicyDocument:
        """The canonical policy document pinned by a lock."""
        commands = {name: command.entry() for name, command in self.commands.items()}
        return PolicyDocument(
            package=self.package,
            commands=commands,
            settings=dict(self.settings) if self.settings else msgspec.UNSET,
            slots=dict(self.slots) if self.slots else msgspec.UNSET,
        )

    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the policy document."""
        return sha256_text(dumps(self.document()))


class BindingError(ValueError):
    """Raised when a Binding breaks a rule; names the rule and the JSON pointer where it broke."""

    def __init__(
        self,
        reason: str,
        *,
        pointer: str,
        rule: str,
        source: str,
        problems: Sequence[BindingError] = (),
    ) -> None:
        self.reason = reason
        self.pointer = pointer
        self.rule = rule
        self.source = source
        # Every broken rule this error stands for (itself, when it is one).
        self.problems: tuple[BindingError, ...] = tuple(problems) or (self,)
        where = f"{source}: {pointer}" if pointer else source
        super().__init__(f"{where}: {reason}")

    @classmethod
    def every(cls, problems: Sequence[BindingError], *, source: str) -> BindingError:
        """One error for all of `problems`: the first's pointer and rule, each one listed."""
        if len(problems) == 1:
            return problems[0]
        first = problems[0]
        listed = "; ".join(f"{p.pointer}: {p.reason}" for p in problems)
        return cls(
            f"{len(problems)} problems: {listed}",
            pointer="",
            rule=first.rule,
            source=source,
            problems=problems,
        )


_Fail = Callable[[str, str, str], BindingError]


def parse_binding(
    obj: object, *, source: str = "binding", declares_capability: bool = True
) -> Binding:
    """Validate a decoded Binding document against every rule of spec-notes §3.

    `declares_capability` says whether the package declares the Project Command capability;
    a package that does not may not configure any command.
    """

    def fail(pointer: str, rule: str, reason: str) -> BindingError:
        return BindingError(reason, pointer=pointer, rule=rule, source=source)

    if not isinstance(obj, dict):
        raise fail("", "binding-object", f"a Binding must be an object, got {kind(obj)}")
    for key in obj:
        if key not in BINDING_FIELDS:
            raise fail(
                f"/{escape(str(key))}",
                "binding-keys",
                f"unknown key {key!r}; a Binding has only 'package', 'settings', 'slots' and "
                "'commands'",
            )
    package = obj.get("package")
    if not isinstance(package, str) or not package or "\x00" in package:
        raise fail(
            "/package",
            "package",
            f"'package' must be a non-empty path to the package directory, got {kind(package)}",
        )
    settings = parse_settings(obj["settings"], fail) if "settings" in obj else {}
    slots = parse_slots(obj["slots"], fail) if "slots" in obj else {}
    raw_commands = obj.get("commands", {})
    if not isinstance(raw_commands, dict):
        raise fail("/commands", "commands-map", f"must be an object, got {kind(raw_commands)}")
    if len(raw_commands) > MAX_COMMANDS:
        raise fail(
            "/commands",
            "commands-count",
            f"at most {MAX_COMMANDS} commands, got {len(raw_commands)}",
        )
    if raw_commands and not declares_capability:
        raise capability_error(package, source=source, detail="")
    commands: dict[str, CommandPolicy] = {}
    # A person fixing a Binding wants every broken command at once, not one per attempt.
    broken: list[BindingError] = []
    for name, entry in raw_commands.items():
        pointer = f"/commands/{escape(str(name))}"
        if not isinstance(name, str) or not is_local_name(name):
            broken.append(
                fail(
                    pointer,
                    "command-name",
                    f"command name {name!r} is not a LocalName (lowercase letters and digits, "
                    f"words joined by single hyphens, at most {LOCAL_NAME_MAX_CHARS} "
                    "characters)",
                )
            )
            continue
        try:
            commands[name] = _parse_command(name, entry, pointer, fail)
        except BindingError as exc:
            broken.extend(exc.problems)
    if broken:
        raise BindingError.every(broken, source=source)
    return Binding(package=package, commands=commands, settings=settings, slots=slots)


def _parse_command(
    name: str,
    entry: object,
    pointer: str,
    fail: _Fail,
) -> CommandPolicy:
    if not isinstance(entry, dict):
        raise fail(
            pointer,
            "command-entry",
            f"must be an object with exactly one of 'run' or 'test', got {kind(entry)}",
        )
    for key in entry:
        if key not in {"run", "test"}:
            raise fail(
                pointer,
                "command-entry",
                f"unknown key {key!r}; a command has exactly one of 'run' or 'test'",
            )
    if "run" in entry and "test" in entry:
        raise fail(pointer, "command-entry", "has both 'run' and 'test'; a command has exactly one")
    if "run" in entry:
        run = entry["run"]
        where = f"{pointer}/run"
        if not isinstance(run, str):
            raise fail(where, "run-path", f"'run' must be one path string, got {kind(run)}")
        _check_path(run, where, fail)
        if not is_run_path(run):
            raise fail(where, "run-path", f"run path {run!r} must be {RUN_RULE}")
        return CommandPolicy(name=name, kind="run", paths=(run,))
    if "test" not in entry:
        raise fail(pointer, "command-entry", "has neither 'run' nor 'test'; it needs exactly one")
    tests = entry["test"]
    where = f"{pointer}/test"
    if not isinstance(tests, list | tuple):
        raise fail(where, "test-paths", f"'test' must be an array of paths, got {kind(tests)}")
    if not 1 <= len(tests) <= MAX_TEST_PATHS:
        raise fail(
            where, "test-paths", f"must list 1-{MAX_TEST_PATHS} test paths, got {len(tests)}"
        )
    seen: dict[str, int] = {}
    broken: list[BindingError] = []
    for index, path in enumerate(tests):
        try:
            _check_test_path(path, index, seen, f"{where}/{index}", fail)
        except BindingError as exc:
            broken.append(exc)
    if broken:
        raise BindingError.every(broken, source=broken[0].source)
    return CommandPolicy(name=name, kind="test", paths=tuple(tests))


def _check_test_path(
    path: object, index: int, seen: dict[str, int], item: str, fail: _Fail
) -> None:
    if not isinstance(path, str):
        raise fail(item, "test-paths", f"test path must be a string, got {kind(path)}")
    _check_path(path, item, fail)
    if not is_test_path(path):
        raise fail(item, "test-paths", f"test path {path!r} must be {TEST_RULE}")
    if path in seen:
        raise fail(item, "test-paths", f"duplicate test path {path!r} (also at index {seen[path]})")
    seen[path] = index


def _check_path(path: str, pointer: str, fail: _Fail) -> None:
    """A command's path obeys the candidate path grammar, reserved directories included."""
    problem = path_problem(path)
    if problem is not None:
        raise fail(pointer, "path-grammar", problem)
    # Admitted, it could never be called: every request naming it is INVALID_INPUT.
    reserved = reserved_component(path)
    if reserved is not None:
        raise fail(
            pointer,
            "reserved-path",
            f"path {path!r} names the reserved directory {reserved}, which no candidate may "
            "supply (node_modules, .git and .jig would smuggle dependencies, history or host "
            "state into it), so no call could run this command",
        )


def capability_error(package: str, *, source: str, detail: str) -> BindingError:
    """The refusal for a `commands` map on a package that does not declare the capability."""
    return BindingError(
        f"package {package!r} does not declare the Project Command capability{detail}, so its "
        "Binding may not configure commands; declare it in the package manifest as "
        "uses: {<slot>: {contract: <path to an exact copy of the descriptor>}}",
        pointer="/commands",
        rule="capability",
        source=source,
    )


def _decode_file(data: bytes, suffix: str, fail: Callable[[str, str], BindingError]) -> object:
    if suffix == ".toml":
        try:
            return tomllib.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise fail("binding-file", f"not valid TOML: {exc}") from exc
    if suffix == ".json":
        try:
            return strict.loads(data)
        except strict.DuplicateKey as exc:
            raise fail("binding-file", f"duplicate key {exc.key!r}") from None
        except strict.StrictJSONError as exc:
            raise fail("binding-file", f"not valid JSON: {exc}") from exc
    raise fail("binding-file", f"a Binding file ends in .toml or .json, not {suffix or '(none)'!r}")


def parse_binding_file(data: bytes, *, suffix: str, source: str) -> Binding:
    """Decode a Binding file's bytes (TOML or JSON, by its `suffix`) and apply every rule."""

    def fail(rule: str, reason: str) -> BindingError:
        return BindingError(reason, pointer="", rule=rule, source=source)

    return parse_binding(_decode_file(data, suffix, fail), source=source)


def require_declared(
    binding: Binding,
    slots: tuple[str, ...],
    *,
    manifest: str | None,
    package_dir: str,
    source: str,
) -> None:
    """Refuse a Binding with commands whose package declares no Project Command slot."""
    if binding.commands and not slots:
        detail = (
            f" (no {' or '.join(MANIFEST_NAMES)} in {package_dir})"
            if manifest is None
            else f" ({manifest} has no matching 'uses' entry)"
        )
        raise capability_error(binding.package, source=source, detail=detail)
