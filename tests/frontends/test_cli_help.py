"""Every option of every verb says what it is for in `--help`."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jigcmd.cliparser import parser


def _verbs() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


@pytest.mark.parametrize("verb", sorted(_verbs()))
def test_every_option_and_argument_has_help_text(verb: str) -> None:
    """No bare `--state-dir STATE_DIR` line: each has words after it."""
    parser = _verbs()[verb]
    bare = [
        action.option_strings or [action.dest]
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert bare == [], f"jigcmd {verb}: options without help text: {bare}"


def test_every_verb_has_a_summary_in_the_top_level_help() -> None:
    """`jigcmd --help` lists each verb with what it does."""
    (sub,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    summaries = {choice.dest: choice.help for choice in sub._choices_actions}
    assert set(summaries) == set(_verbs())
    assert all(summaries.values()), summaries
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", "--help"], capture_output=True, text=True, check=True
    )
    assert all(verb in done.stdout for verb in summaries)


@pytest.mark.parametrize("verb", sorted(_verbs()))
def test_every_verb_takes_verbose_after_its_name_too(verb: str) -> None:
    """`jigcmd VERB -v` as `jigcmd -v VERB`: both spellings of the debug logs work."""
    assert "-v" in _verbs()[verb]._option_string_actions
    assert "--verbose" in _verbs()[verb]._option_string_actions


@pytest.mark.parametrize(
    ("argv", "verbose"),
    [
        (["runs"], False),
        (["-v", "runs"], True),
        (["runs", "-v"], True),
        (["runs", "--verbose"], True),
    ],
)
def test_verbose_is_set_before_or_after_the_verb_and_off_without_it(
    argv: list[str], verbose: bool
) -> None:
    """A verb that was not given `-v` keeps the top level's answer."""
    assert parser().parse_args(argv).verbose is verbose


@pytest.mark.parametrize("verb", ["serve", "run", "lock"])
def test_the_lock_default_in_help_is_where_a_typescript_bindings_lock_is(verb: str) -> None:
    """`bindings/command.ts` is admitted by `bindings/command.jigcmd.lock`, not `jigcmd.lock`."""
    from jigcmd.command.assembly import default_lock_path  # noqa: PLC0415 - the rule the help words

    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", verb, "--help"],
        capture_output=True, text=True, check=True, env={**os.environ, "COLUMNS": "400"},
    )  # fmt: skip
    (line,) = [line for line in done.stdout.splitlines() if line.lstrip().startswith("--lock")]
    assert line.endswith(
        "(default: jigcmd.lock beside the Binding; NAME.jigcmd.lock beside a TypeScript "
        "Binding NAME.ts)"
    ), line
    assert default_lock_path(Path("/p/bindings/command.ts")) == Path(
        "/p/bindings/command.jigcmd.lock"
    )
    assert default_lock_path(Path("/p/.jig/binding.toml")) == Path("/p/.jig/jigcmd.lock")
