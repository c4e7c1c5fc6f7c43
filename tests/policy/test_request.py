"""Request validation against the admitted commands (spec-notes §4)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jigcmd.errors import Code, JigError
from jigcmd.policy.binding import CommandPolicy
from jigcmd.policy.digests import candidate_digest, stdin_digest
from jigcmd.policy.request import validate_request

COMMANDS = {
    "cli": CommandPolicy(name="cli", kind="run", paths=("src/cli.ts",)),
    "tests": CommandPolicy(name="tests", kind="test", paths=("test/b.test.ts", "test/a.test.ts")),
}
NEEDED = {"cli": ["src/cli.ts"], "tests": ["test/b.test.ts", "test/a.test.ts"]}

# Extra files end in .txt and directories have no dot, so no extra path is ever both.
directory = st.from_regex(r"\A[a-z]{1,5}\Z")
extra_path = st.builds(
    lambda dirs, name: "/".join([*dirs, name]),
    st.lists(directory, max_size=3),
    st.from_regex(r"\A[a-z]{1,5}\.txt\Z"),
)
texts = st.text(max_size=50)
safe_args = st.lists(st.text(max_size=20).filter(lambda a: "\x00" not in a), max_size=32)


@st.composite
def valid_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """A request that satisfies every rule."""
    command = draw(st.sampled_from(sorted(COMMANDS)))
    files = {path: draw(texts) for path in NEEDED[command]}
    files.update(draw(st.dictionaries(extra_path, texts, max_size=10)))
    request: dict[str, Any] = {"command": command, "files": files}
    if command == "cli" and draw(st.booleans()):
        request["args"] = draw(safe_args)
    elif draw(st.booleans()):
        request["args"] = []
    if draw(st.booleans()):
        request["stdin"] = draw(texts)
    return request


def rejection(request: object) -> JigError:
    """The JigError validating `request` raises."""
    with pytest.raises(JigError) as caught:
        validate_request(request, COMMANDS)
    assert caught.value.code is Code.INVALID_INPUT
    return caught.value


def base(command: str = "cli", **extra: Any) -> dict[str, Any]:
    """A minimal valid request for `command`."""
    return {"command": command, "files": dict.fromkeys(NEEDED[command], "x"), **extra}


@given(valid_inputs())
def test_valid_requests_always_pass(request: dict[str, Any]) -> None:
    """Any request satisfying every rule is accepted with its digests and invocation."""
    valid = validate_request(request, COMMANDS)
    assert valid.command is COMMANDS[request["command"]]
    assert valid.files == tuple(sorted(request["files"].items()))
    assert valid.candidate_digest == candidate_digest(request["files"])
    assert valid.stdin_digest == stdin_digest(request.get("stdin", ""))
    assert valid.invocation == valid.command.invocation(request.get("args", []))


def _set(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda r: r.__setitem__(key, value)


def _add_file(path: str, text: object = "") -> Callable[[dict[str, Any]], None]:
    return lambda r: r["files"].__setitem__(path, text)


def _remove_needed(r: dict[str, Any]) -> None:
    # Renamed rather than deleted: a candidate of one file would otherwise break rule 2
    # (1-64 files) first, which the rules' order reports instead.
    text = r["files"].pop(NEEDED[r["command"]][0])
    r["files"].setdefault("jigcmd_filler_0.ts", text)


def _as_test_with_args(r: dict[str, Any]) -> None:
    r["command"] = "tests"
    r["files"].update(dict.fromkeys(NEEDED["tests"], ""))
    r["args"] = ["x"]


MUTATIONS: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("input-keys", _set("env", {})),
    ("command", _set("command", "Deploy")),
    ("command", _set("command", 7)),
    ("files", _set("files", {})),
    ("files", _set("files", [])),
    ("files", lambda r: r["files"].update({f"f{i}.txt": "" for i in range(64)})),
    ("path-grammar", _add_file("../x.ts")),
    ("path-grammar", _add_file("/etc/passwd")),
    ("reserved-path", _add_file("node_modules/x.ts")),
    ("reserved-path", _add_file("a/.git/config")),
    ("file-text", _add_file("data.txt", 1)),
    ("path-collision", lambda r: r["files"].update({"zz": "", "zz/a.txt": ""})),
    # One byte past the limit on its own, whatever the base candidate holds (an empty one too).
    ("candidate-size", _add_file("big.txt", "x" * 262_145)),
    ("args", _set("args", "x")),
    ("args", _set("args", ["a"] * 33)),
    ("args", _set("args", ["a\x00b"])),
    ("args", _set("args", ["é" * 513])),
    ("args", _set("args", [1])),
    ("stdin", _set("stdin", "é" * 8193)),
    ("stdin", _set("stdin", None)),
    ("command-files", _remove_needed),
    ("test-args", _as_test_with_args),
]


@given(valid_inputs(), st.sampled_from(MUTATIONS))
def test_any_single_rule_break_is_rejected_with_that_rule(
    request: dict[str, Any], mutation: tuple[str, Callable[[dict[str, Any]], None]]
) -> None:
    """Breaking exactly one rule of a valid request fails with that rule's name."""
    rule, mutate = mutation
    broken = copy.deepcopy(request)
    mutate(broken)
    error = rejection(broken)
    assert error.details is not None
    assert error.details["rule"] == rule


def test_a_non_object_input_is_rejected() -> None:
    """Rule 1: the input must be an object."""
    error = rejection(["cli"])
    assert error.details == {"pointer": "", "rule": "input-object"}


def test_an_unconfigured_command_name_is_unavailable_naming_the_admitted_ones() -> None:
    """Rule 1: a well-formed name the Binding does not configure is unavailable (the seed)."""
    with pytest.raises(JigError) as caught:
        validate_request(base(command="cli") | {"command": "x"}, COMMANDS)
    assert caught.value.code is Code.UNAVAILABLE
    assert caught.value.message == (
        "command 'x' is not configured by the admitted Binding (admitted: cli, tests)"
    )


@pytest.mark.parametrize("name", ["Not A Name", "-x", "a--b", "a" * 65, ""])
def test_a_malformed_command_name_is_invalid_input(name: str) -> None:
    """Rule 1: a name outside the LocalName grammar is a bad request, naming the grammar."""
    error = rejection(base(command="cli") | {"command": name})
    assert error.message.startswith(f"/command: {name!r} is not a command name (a LocalName")
    assert error.message.endswith("admitted: cli, tests)")
    assert error.details == {"pointer": "/command", "rule": "command"}


def test_nothing_is_admitted_when_the_binding_grants_nothing() -> None:
    """Rule 1: with no admitted commands, every command is unavailable."""
    with pytest.raises(JigError, match=r"admitted: none"):
        validate_request(base(), {})


def test_reserved_directories_are_named_with_the_pointer() -> None:
    """Rule 3: a reserved component is named, at the file's RFC 6901 pointer."""
    error = rejection(base(files={"src/cli.ts": "", "node_modules/a.ts": ""}))
    assert error.message == "/files/node_modules~1a.ts: reserved directory node_modules"
    assert error.details == {"pointer": "/files/node_modules~1a.ts", "rule": "reserved-path"}


def test_file_directory_collisions_are_named() -> None:
    """Rule 3: a path used as both file and directory is named."""
    error = rejection(base(files={"src/cli.ts": "", "a": "", "a/b.ts": ""}))
    assert error.message == "/files: 'a' is both a file and a directory (because of 'a/b.ts')"


def test_candidate_size_counts_utf8_bytes() -> None:
    """Rule 4: the limit is on UTF-8 bytes, so 2-byte characters count twice."""
    at_limit = base(files={"src/cli.ts": "é" * 131_072})
    validate_request(at_limit, COMMANDS)
    error = rejection(base(files={"src/cli.ts": "é" * 131_072 + "x"}))
    assert error.message == "candidate exceeds 256 KiB (262,145 bytes)"
    assert error.details == {"pointer": "/files", "rule": "candidate-size"}


def test_argument_size_counts_utf8_bytes() -> None:
    """Rule 5: 1,024 bytes is fine; 513 two-byte characters are 1,026 bytes and too many."""
    validate_request(base(args=["é" * 512]), COMMANDS)
    error = rejection(base(args=["ok", "é" * 513]))
    assert error.message == "/args/1: argument exceeds 1,024 bytes (1,026)"


def test_stdin_size_counts_utf8_bytes() -> None:
    """Rule 6: stdin is limited to 16,384 UTF-8 bytes."""
    validate_request(base(stdin="€" * 5461), COMMANDS)
    error = rejection(base(stdin="€" * 5462))
    assert error.message == "/stdin: exceeds 16,384 bytes (16,386 bytes)"


def test_missing_command_files_are_named() -> None:
    """Rule 7: every file a command names must be supplied."""
    error = rejection({"command": "tests", "files": {"test/b.test.ts": ""}})
    assert error.message == "/files: command 'tests' needs 'test/a.test.ts', which is not in files"


def test_test_commands_refuse_arguments_but_accept_an_empty_list() -> None:
    """Rule 8: a test command takes no arguments; an explicit [] is fine."""
    assert validate_request(base("tests", args=[]), COMMANDS).args == ()
    error = rejection(base("tests", args=["--bail"]))
    assert error.message == (
        "/args: test command 'tests' accepts no arguments (got 1); fix: call it with no "
        "arguments; to run only some of its test files, the Binding needs a command whose "
        "`test` list names just those, admitted again with `jigcmd lock` (bun test's own "
        "options, such as --bail or -t, have no equivalent)"
    )


def test_rules_apply_in_order() -> None:
    """When several rules break, the earliest one is reported."""
    request = {"command": "tests", "files": {"../x": 1}, "args": ["a"] * 40, "stdin": 3}
    assert rejection(request).details == {"pointer": "/files/..~1x", "rule": "path-grammar"}


def test_defaults_are_no_args_and_empty_stdin() -> None:
    """Absent args and stdin mean [] and ""."""
    valid = validate_request(base(), COMMANDS)
    assert (valid.args, valid.stdin) == ((), "")
    assert valid.invocation == ["bun", "src/cli.ts"]


def test_test_invocation_keeps_binding_order() -> None:
    """The test invocation lists paths in Binding order, not sorted."""
    valid = validate_request(base("tests"), COMMANDS)
    assert valid.invocation == ["bun", "test", "test/b.test.ts", "test/a.test.ts"]


def test_lone_surrogates_are_rejected_even_if_the_wire_let_them_through() -> None:
    """A lone surrogate that slipped past strict decoding is still invalid input."""
    error = rejection(base(stdin="\ud800"))
    assert error.details == {"pointer": "/stdin", "rule": "strict-json"}
