"""A TypeScript Binding's evaluation read back: one JSON line, or a refusal saying why not."""

from __future__ import annotations

import json

import pytest

from jigcmd.policy.binding import BindingError
from jigcmd.policy.bindingscript import (
    EVALUATOR,
    Evaluated,
    Evaluation,
    binding_id,
    check_listed,
    evaluation_files,
    read_evaluation,
)

SOURCE = "/p/bindings/command.ts"
BINDING = {"package": "flows/command"}


def run(stdout: bytes = b"", stderr: bytes = b"", **ending: object) -> Evaluation:
    fields: dict[str, object] = {
        "truncated": False,
        "exit_code": 0,
        "signal": None,
        "stop_reason": "exited",
        **ending,
    }
    return Evaluation(stdout=stdout, stderr=stderr, **fields)  # type: ignore[arg-type]


def line(message: object) -> bytes:
    return json.dumps(message).encode() + b"\n"


def refusal(evaluation: Evaluation) -> str:
    with pytest.raises(BindingError) as caught:
        read_evaluation(
            evaluation,
            source=SOURCE,
            host_root="/p",
            limit_s=10.0,
            relative="bindings/command.ts",
        )
    assert caught.value.rule == "binding-script"
    assert str(caught.value).startswith(f"{SOURCE}: ")
    assert str(caught.value).endswith("; nothing was admitted")
    return caught.value.reason


def test_the_evaluators_one_line_is_the_definition() -> None:
    """Exactly one JSON line with the definers' data: the Binding's JSON and the jig's."""
    got = read_evaluation(
        run(line({"binding": BINDING, "jig": None})), source=SOURCE, host_root="/p", limit_s=10.0
    )
    assert got == Evaluated(binding=BINDING, jig=None)


@pytest.mark.parametrize(
    ("evaluation", "reason"),
    [
        (
            run(b"hello\n" + line({"binding": BINDING, "jig": None})),
            "printed while being evaluated",
        ),
        (
            run(line({"binding": BINDING, "jig": None}), b"warn\n"),
            "(a Binding only defines): 'warn'",
        ),
        (run(b"hello\n"), "printed while being evaluated: 'hello'"),
        (run(line({"binding": BINDING, "jig": None}), truncated=True), "printed"),
        (run(), "ended (exit code 0) before its default export was read"),
        (run(exit_code=None, signal="SIGKILL"), "ended (killed by SIGKILL)"),
        (
            run(stop_reason="deadline", exit_code=None, signal="SIGKILL"),
            "did not finish within 10 s",
        ),
        (run(line([1])), "answered an array, not a definition"),
        (run(line({"binding": BINDING})), "something other than a definition"),
    ],
)
def test_what_a_binding_does_beyond_defining_is_refused(
    evaluation: Evaluation, reason: str
) -> None:
    """Printing, exiting, dying, looping, or an answer of the wrong shape: refused."""
    assert reason in refusal(evaluation)


def test_a_throw_names_the_file_line_and_column_from_the_stack() -> None:
    """Bun's stack frames name the project file; jigcmd's own module's frames are skipped."""
    stack = (
        "TypeError: Binding definition contains a non-JSON value\n"
        "    at snapshot (/work/node_modules/@jigging/jig/index.js:44:44)\n"
        "    at /work/bindings/command.ts:3:16"
    )
    error = {
        "kind": "threw",
        "path": "bindings/command.ts",
        "name": "TypeError",
        "message": "Binding definition contains a non-JSON value",
        "stack": stack,
    }
    reason = refusal(run(line({"error": error})))
    assert reason.startswith(
        "evaluating it threw TypeError at /p/bindings/command.ts:3:16: Binding definition"
    )


def test_a_syntax_error_names_the_position_bun_gives() -> None:
    """A BuildMessage carries a position, which names the file and line."""
    error = {
        "kind": "threw",
        "path": "bindings/command.ts",
        "name": "BuildMessage",
        "message": "Unexpected end of file",
        "stack": "",
        "position": {"file": "/work/bindings/command.ts", "line": 2, "column": 57},
    }
    assert "BuildMessage at /p/bindings/command.ts:2:57: Unexpected" in refusal(
        run(line({"error": error}))
    )


def test_an_error_without_a_place_names_the_file() -> None:
    """An absent import (no position from Bun) still names the Binding's file."""
    error = {
        "kind": "threw",
        "path": "bindings/command.ts",
        "name": "ResolveMessage",
        "message": "Cannot find package 'left-pad'",
        "stack": "ResolveMessage: …",
    }
    reason = refusal(run(line({"error": error})))
    assert reason.startswith("evaluating it threw ResolveMessage at /p/bindings/command.ts: Cannot")


def test_a_wrong_export_is_refused_naming_the_file_once() -> None:
    """The Binding's own export: the refusal already names it; jig.ts's: named, a colon after."""
    error = {
        "kind": "export",
        "path": "bindings/command.ts",
        "message": "its default export is object, not a defineBinding(...) result",
    }
    assert refusal(run(line({"error": error}))) == (
        "its default export is object, not a defineBinding(...) result; nothing was admitted"
    )
    error = error | {"path": "jig.ts", "message": "its default export is number, not a …"}
    assert refusal(run(line({"error": error}))).startswith(
        "/p/jig.ts: its default export is number"
    )


def test_a_binding_file_name_is_its_id_and_must_be_a_local_name() -> None:
    """`command.ts` is `command`; `Command.ts` or `my_binding.ts` is refused."""
    assert binding_id("command.ts", "command", source=SOURCE) == "command"
    for name in ("Command", "my_binding", "a--b"):
        with pytest.raises(BindingError, match=r"is not <LocalName>\.ts"):
            binding_id(f"{name}.ts", name, source=SOURCE)


def test_the_evaluation_tree_is_the_binding_the_jig_and_jigcmds_module() -> None:
    """Nothing else is sent; a project path outside the grammar cannot be evaluated."""
    files = evaluation_files(
        ("bindings/command.ts", "b"),
        ("jig.ts", "j"),
        {"index.js": "i", "evaluate.js": "e"},
        source=SOURCE,
    )
    assert [path for path, _ in files] == [
        "bindings/command.ts",
        "jig.ts",
        EVALUATOR,
        "node_modules/@jigging/jig/index.js",
    ]
    with pytest.raises(BindingError, match="cannot be evaluated"):
        evaluation_files(("bindings/my file.ts", "b"), None, {}, source=SOURCE)


@pytest.mark.parametrize(
    "bindings",
    [
        {"kind": "discover", "roots": ["./bindings"]},
        {"kind": "discover", "roots": ["."]},
        {"kind": "discover", "roots": ["bindings/"]},
        ["./bindings/command.ts"],
    ],
)
def test_a_binding_the_jig_lists_is_accepted(bindings: object) -> None:
    """discover('./bindings'), the whole project, or the member listed by path."""
    check_listed(
        {"bindings": bindings}, "bindings/command.ts", source=SOURCE, jig_source="/p/jig.ts"
    )


@pytest.mark.parametrize(
    ("jig", "reason"),
    [
        ({"flows": {"kind": "discover", "roots": ["./flows"]}}, "lists its bindings as nothing"),
        ({"bindings": {"kind": "discover", "roots": ["./other"]}}, "discover('./other')"),
        ({"bindings": ["bindings/other.ts"]}, "['bindings/other.ts']"),
        ({"bindings": [], "extra": 1}, "Jig definition has unknown field extra"),
        ([], "not an object"),
    ],
)
def test_a_binding_the_jig_does_not_list_is_refused(jig: object, reason: str) -> None:
    """The project's jig.ts names its Bindings; one it does not name is not one of them."""
    with pytest.raises(BindingError) as caught:
        check_listed(jig, "bindings/command.ts", source=SOURCE, jig_source="/p/jig.ts")
    assert reason in str(caught.value)
