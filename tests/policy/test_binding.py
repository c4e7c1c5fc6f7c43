"""Binding parsing (spec-notes §3)."""

from __future__ import annotations

import json
import re

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jigcmd.policy.binding import (
    RUN_PATH_PATTERN,
    TEST_PATH_PATTERN,
    Binding,
    BindingError,
    CommandPolicy,
    bun_runs_as_test,
    parse_binding,
    parse_binding_file,
)
from jigcmd.policy.planner import BUN_FLAGS

GOOD_COMMANDS = {
    "cli": {"run": "src/cli.ts"},
    "tests": {"test": ["test/a.test.ts", "test/b.spec.js"]},
}


def parse_commands(commands: object) -> Binding:
    """Parse a Binding for package '.' with the given commands value."""
    return parse_binding({"package": ".", "commands": commands}, source="b.toml")


def rejection(obj: object, **kwargs: bool) -> BindingError:
    """Return the BindingError that parsing `obj` raises."""
    with pytest.raises(BindingError) as caught:
        parse_binding(obj, source="b.toml", **kwargs)
    return caught.value


def test_a_valid_binding_yields_its_commands_in_order() -> None:
    """Each entry becomes a CommandPolicy with its kind and paths in Binding order."""
    binding = parse_commands(GOOD_COMMANDS)
    assert binding.package == "."
    assert list(binding.commands) == ["cli", "tests"]
    assert binding.commands["cli"] == CommandPolicy(name="cli", kind="run", paths=("src/cli.ts",))
    assert binding.commands["tests"].paths == ("test/a.test.ts", "test/b.spec.js")


def test_run_invocation_is_bun_entry_then_args() -> None:
    """A run command's logical argv is bun, the entry point, then the caller's args."""
    command = CommandPolicy(name="cli", kind="run", paths=("src/cli.ts",))
    assert command.invocation(["--x", "y"]) == ["bun", "src/cli.ts", "--x", "y"]


def test_test_invocation_lists_paths_in_binding_order() -> None:
    """A test command's logical argv is bun test and its paths in Binding order."""
    command = CommandPolicy(name="t", kind="test", paths=("b.test.ts", "a.test.ts"))
    assert command.invocation() == ["bun", "test", "b.test.ts", "a.test.ts"]
    assert not command.accepts_args


def test_executed_test_argv_marks_paths_as_files() -> None:
    """Test paths get a ./ prefix so Bun treats them as files, not name filters."""
    command = CommandPolicy(name="t", kind="test", paths=("b.test.ts", "a.test.ts"))
    assert command.bun_argv("bun") == ["bun", "test", *BUN_FLAGS, "./b.test.ts", "./a.test.ts"]


def test_executed_argv_puts_posture_flags_before_the_entry_point() -> None:
    """The real argv carries the Bun posture flags before the script, so args stay script args."""
    command = CommandPolicy(name="cli", kind="run", paths=("src/cli.ts",))
    assert command.bun_argv("/rt/bun", ["--no-env-file"]) == [
        "/rt/bun",
        *BUN_FLAGS,
        "./src/cli.ts",
        "--no-env-file",
    ]


def test_omitted_and_empty_commands_grant_nothing() -> None:
    """No `commands` key, or an empty map, yields a Binding with no commands."""
    assert parse_binding({"package": "pkg"}).commands == {}
    assert parse_commands({}).commands == {}


@pytest.mark.parametrize(
    ("obj", "pointer", "rule", "reason"),
    [
        (None, "", "binding-object", "must be an object, got null"),
        ({"package": ".", "commands": None}, "/commands", "commands-map", "got null"),
        (
            {"package": ".", "commands": {"cli": {"shell": "bun test"}}},
            "/commands/cli",
            "command-entry",
            "unknown key 'shell'",
        ),
        (
            {"package": ".", "commands": {"cli": {"run": "../bad.ts"}}},
            "/commands/cli/run",
            "path-grammar",
            "path must not contain '..' components",
        ),
        (
            {"package": ".", "commands": {"cli": {"run": "/tmp/bad.ts"}}},
            "/commands/cli/run",
            "path-grammar",
            "must be relative",
        ),
        (
            {"package": ".", "commands": {"cli": {"run": "x.ts", "test": ["x.test.ts"]}}},
            "/commands/cli",
            "command-entry",
            "has both 'run' and 'test'",
        ),
        (
            {"package": ".", "commands": {"test": {"test": []}}},
            "/commands/test/test",
            "test-paths",
            "1-16 test paths, got 0",
        ),
    ],
)
def test_the_spec_bad_examples_are_rejected_with_rule_and_pointer(
    obj: object, pointer: str, rule: str, reason: str
) -> None:
    """Every bad Binding example in spec-notes §3 is refused, naming the rule and where."""
    error = rejection(obj)
    assert (error.pointer, error.rule) == (pointer, rule)
    assert reason in str(error)
    assert str(error).startswith(f"b.toml: {pointer}" if pointer else "b.toml: ")


@pytest.mark.parametrize(
    ("commands", "pointer", "rule", "reason"),
    [
        ({f"c{i}": {"run": "a.ts"} for i in range(9)}, "/commands", "commands-count", "got 9"),
        ({"Cli": {"run": "a.ts"}}, "/commands/Cli", "command-name", "not a LocalName"),
        ({"a" * 65: {"run": "a.ts"}}, "/commands/" + "a" * 65, "command-name", "LocalName"),
        ({"cli": "src/cli.ts"}, "/commands/cli", "command-entry", "got str"),
        ({"cli": {}}, "/commands/cli", "command-entry", "has neither"),
        ({"cli": {"run": ["a.ts"]}}, "/commands/cli/run", "run-path", "one path string"),
        ({"cli": {"run": "src/cli.json"}}, "/commands/cli/run", "run-path", "a .ts or .js file"),
        ({"cli": {"run": "a b.ts"}}, "/commands/cli/run", "path-grammar", "forbidden character"),
        ({"t": {"test": "a.test.ts"}}, "/commands/t/test", "test-paths", "array of paths"),
        (
            {"t": {"test": [f"t{i}.test.ts" for i in range(17)]}},
            "/commands/t/test",
            "test-paths",
            "got 17",
        ),
        ({"t": {"test": ["a.ts"]}}, "/commands/t/test/0", "test-paths", "ends in .test.ts"),
        ({"t": {"test": [1]}}, "/commands/t/test/0", "test-paths", "must be a string"),
        (
            {"t": {"test": ["a.test.ts", "a.test.ts"]}},
            "/commands/t/test/1",
            "test-paths",
            "duplicate test path 'a.test.ts' (also at index 0)",
        ),
        (
            {"t": {"test": ["x/../a.test.ts"]}},
            "/commands/t/test/0",
            "path-grammar",
            "'..' components",
        ),
        (
            {"cli": {"run": "node_modules/x.ts"}},
            "/commands/cli/run",
            "reserved-path",
            "names the reserved directory node_modules",
        ),
        (
            {"t": {"test": ["a.test.ts", "src/.git/b.test.ts"]}},
            "/commands/t/test/1",
            "reserved-path",
            "reserved directory .git, which no candidate may supply",
        ),
        (
            {"t": {"test": [".jig/a.test.ts"]}},
            "/commands/t/test/0",
            "path-grammar",
            "must start with an ASCII letter",
        ),
        (
            {"t": {"test": ["lib/.jig/a.test.ts"]}},
            "/commands/t/test/0",
            "reserved-path",
            "reserved directory .jig",
        ),
    ],
)
def test_each_command_rule_is_enforced(
    commands: object, pointer: str, rule: str, reason: str
) -> None:
    """Every command rule refuses a violation at the offending pointer."""
    error = rejection({"package": ".", "commands": commands})
    assert (error.pointer, error.rule) == (pointer, rule)
    assert reason in error.reason


def test_names_with_slashes_are_escaped_in_pointers() -> None:
    """A bad command name containing '/' is escaped as RFC 6901 requires."""
    assert rejection({"package": ".", "commands": {"a/b": {"run": "a.ts"}}}).pointer == (
        "/commands/a~1b"
    )


@pytest.mark.parametrize(
    ("obj", "pointer", "rule"),
    [
        ({"commands": {}}, "/package", "package"),
        ({"package": ""}, "/package", "package"),
        ({"package": 3}, "/package", "package"),
        ({"package": ".", "extra": 1}, "/extra", "binding-keys"),
    ],
)
def test_binding_level_rules_are_enforced(obj: object, pointer: str, rule: str) -> None:
    """A Binding needs a package path and has no other keys than package and commands."""
    error = rejection(obj)
    assert (error.pointer, error.rule) == (pointer, rule)


def test_commands_on_a_package_without_the_capability_are_invalid() -> None:
    """A non-empty commands map is refused when the package does not declare the capability."""
    error = rejection(
        {"package": ".", "commands": {"cli": {"run": "a.ts"}}}, declares_capability=False
    )
    assert (error.pointer, error.rule) == ("/commands", "capability")


def test_an_empty_map_is_fine_without_the_capability() -> None:
    """Granting nothing needs no capability declaration."""
    binding = parse_binding({"package": ".", "commands": {}}, declares_capability=False)
    assert binding.commands == {}


@given(
    st.dictionaries(
        st.from_regex(r"\A[a-z0-9]{1,8}(-[a-z0-9]{1,8}){0,2}\Z"),
        st.sampled_from([{"run": "src/cli.ts"}, {"test": ["t/a.test.ts", "t/b.spec.ts"]}]),
        max_size=8,
    )
)
def test_the_policy_document_round_trips_through_parse(commands: dict[str, object]) -> None:
    """Parsing a Binding's own canonical document gives back the same Binding and digest."""
    binding = parse_commands(commands)
    document = json.loads(msgspec.json.encode(binding.document()))
    again = parse_binding(document)
    assert again == binding
    assert again.digest() == binding.digest()


def test_the_digest_changes_when_a_command_changes() -> None:
    """Any change in a command path changes the Binding digest."""
    changed = {**GOOD_COMMANDS, "cli": {"run": "src/other.ts"}}
    assert parse_commands(GOOD_COMMANDS).digest() != parse_commands(changed).digest()


@pytest.mark.parametrize(
    ("suffix", "content", "reason"),
    [
        (".toml", b"package = ", "not valid TOML"),
        (".json", b'{"package": "pkg", "package": "x"}', "duplicate key 'package'"),
        (".json", b"{", "not valid JSON"),
        (".yaml", b"package: pkg", "ends in .toml or .json"),
    ],
)
def test_binding_file_bytes_that_do_not_decode_are_refused(
    suffix: str, content: bytes, reason: str
) -> None:
    """Syntax errors, duplicate keys and unknown suffixes are binding-file errors, from bytes."""
    with pytest.raises(BindingError, match=reason) as caught:
        parse_binding_file(content, suffix=suffix, source="b" + suffix)
    assert caught.value.rule == "binding-file"


def test_binding_file_bytes_decode_to_the_same_binding_as_the_document() -> None:
    """TOML bytes give exactly what `parse_binding` gives for the decoded document."""
    data = b'package = "pkg"\n[commands.cli]\nrun = "src/cli.ts"\n'
    parsed = parse_binding_file(data, suffix=".toml", source="b.toml")
    assert parsed == parse_binding({"package": "pkg", "commands": {"cli": {"run": "src/cli.ts"}}})


# Measured with the bundled Bun 1.4: bare `bun test` ran each of these, and `bun FILE` each
# entry point.
# Files bare `bun test` (Bun 1.4) runs that the reference's rule (spec-notes §3) does not
# take: a Binding keeps the rule, so that the reference's own tools accept what jigcmd writes.
BUN_RUNS_TESTS = [
    "test/comp.test.tsx",
    "test/m.test.mts",
    "test/j.test.jsx",
    "test/u_test.ts",
    "_test.ts",
    "a.spec.cjs",
    "b_spec.mjs",
    "c.test.cts",
    "d.TEST.ts",
]


@pytest.mark.parametrize("path", BUN_RUNS_TESTS)
def test_a_test_file_bun_runs_outside_the_references_rule_is_refused(path: str) -> None:
    """Bun would run it; the Binding's rule is the reference's, and the schema agrees."""
    error = rejection({"package": ".", "commands": {"t": {"test": [path]}}})
    assert error.rule == "test-paths"
    assert "ends in .test.ts, .test.js, .spec.ts or .spec.js" in error.reason
    assert not re.search(TEST_PATH_PATTERN, path)
    assert bun_runs_as_test(path)


@pytest.mark.parametrize("path", ["a-test.ts", "a.tests.ts", "a.test.json", "test.ts"])
def test_a_file_bun_test_would_not_find_is_neither_a_test_path_nor_bun_s(path: str) -> None:
    """Names bare `bun test` passes over: refused, and not counted as Bun's either."""
    error = rejection({"package": ".", "commands": {"t": {"test": [path]}}})
    assert error.rule == "test-paths"
    assert not re.search(TEST_PATH_PATTERN, path)
    assert not bun_runs_as_test(path)


@pytest.mark.parametrize("path", ["src/main.mts", "src/app.tsx", "bin/cli.mjs", "x.cjs"])
def test_a_run_path_is_a_ts_or_js_file_as_the_reference_says(path: str) -> None:
    """`run` takes .ts and .js (spec-notes §3), though Bun runs these too."""
    error = rejection({"package": ".", "commands": {"cli": {"run": path}}})
    assert error.rule == "run-path"
    assert not re.search(RUN_PATH_PATTERN, path)


def test_a_binding_with_several_broken_commands_names_every_one() -> None:
    """One refusal lists each broken command and test path, not only the first."""
    error = rejection(
        {
            "package": ".",
            "commands": {
                "Bad": {"run": "a.ts"},
                "cli": {"run": "a.json"},
                "t": {"test": ["a.ts", "b.test.ts", "c.txt"]},
            },
        }
    )
    assert [(p.pointer, p.rule) for p in error.problems] == [
        ("/commands/Bad", "command-name"),
        ("/commands/cli/run", "run-path"),
        ("/commands/t/test/0", "test-paths"),
        ("/commands/t/test/2", "test-paths"),
    ]
    assert str(error).startswith("b.toml: 4 problems: /commands/Bad: ")
