"""The scans behind the notes on what bare Bun does that Bun under jigcmd does not: which
words of a `scripts.test` are Bun options, which calls are `.only` or a `bun` spawned by
name, and a `bunfig.toml` that is not TOML."""

from __future__ import annotations

from jigcmd.command.bunfig import bunfig_note
from jigcmd.command.testcalls import only_note, spawn_note
from jigcmd.command.testscript import scripts_test_note


def _script(script: str) -> str | None:
    return scripts_test_note({"package.json": '{"scripts": {"test": ' + f'"{script}"' + "}}"})


def test_a_path_filter_is_told_apart_from_an_option_value() -> None:
    """`--timeout 8000` takes its value; `test/unit` after it is a path filter, which gets
    the command-of-their-own fix, and what follows `&&` is another program's."""
    note = _script("tsc && bun test --timeout 8000 test/unit && echo done")
    assert note is not None
    assert "(--timeout 8000 test/unit) does not apply" in note
    assert "give the tests the script selects a command of their own" in note
    assert "preloads" not in note
    assert _script("bun test --timeout 8000") is not None
    assert "selects" not in (_script("bun test --timeout=8000") or "")


def test_a_script_that_is_not_shell_words_gets_no_note() -> None:
    """An unclosed quote is not a script to read."""
    assert _script("bun test '--preload") is None


def test_only_as_another_objects_member_or_in_a_string_is_not_a_call() -> None:
    """`options.test.only` and `"test.only"` are not Bun's `.only`; `it.only(` is."""
    files = {
        "a.test.ts": 'const x = options.test.only; const y = "test.only";\n',
        "b.test.ts": "it.only('b', () => {});\n",
    }
    assert only_note(files, files) is not None
    assert only_note(files, ["a.test.ts"]) is None


def test_a_spawn_of_another_program_or_of_bunx_is_not_named() -> None:
    """Only the program `bun` itself; a template literal counts as a literal."""
    files = {
        "a.ts": 'Bun.spawn(["bunx", "x"]); spawnSync(["node"]);\n',
        "b.ts": "Bun.spawnSync([`bun`, 'x.ts']);\n",
        "c.json": '{"spawn": ["bun"]}',
    }
    note = spawn_note(files, files)
    assert note is not None and note.startswith("b.ts spawns `bun` by name")


def test_a_bunfig_that_is_not_toml_is_said_not_read() -> None:
    """No setting can be named: the note says none applies."""
    note = bunfig_note({"bunfig.toml": "[test\npreload = "})
    assert note is not None
    assert note.endswith(
        "options): none of its settings apply (nor is it TOML jigcmd reads) "
        "(docs/binding.md#what-bun-runs-with)"
    )
