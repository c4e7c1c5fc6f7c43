"""The usage error for words `run` and `request` do not know: a run command's own arguments
follow `--`, a test command's are no arguments at all (validation.md rule 8)."""

from __future__ import annotations

from pathlib import Path

import jigcmd
from tests.frontends.test_init import jigcmd as jigcmd_cli

EXAMPLE = Path(jigcmd.__file__).parent / "example"
BINDING = EXAMPLE / "binding.toml"
FILES = str(EXAMPLE / "candidates" / "passing")


def test_a_test_commands_unknown_option_is_not_steered_behind_the_dashes() -> None:
    """The tester's `tests --files DIR --bail`: no `-- --bail` line, which rule 8 refuses in
    turn, but how to run fewer tests: a command of fewer files in this Binding, locked."""
    done = jigcmd_cli("run", "--binding", str(BINDING), "tests", "--files", FILES, "--bail")
    assert done.returncode == 2
    assert "-- --bail" not in done.stderr
    assert (
        "unrecognized arguments: --bail; test command 'tests' accepts no arguments, after `--` "
        "or not (docs/validation.md rule 8); to run only some of its test files, add a command "
        f"to {BINDING} whose `test` list names just those, then admit it again: jigcmd lock "
        f"--binding {BINDING} (bun test's own options, such as --bail or -t, have no "
        "equivalent)"
    ) in done.stderr


def test_a_run_commands_unknown_words_get_the_line_with_the_dashes() -> None:
    """`cli` is a run command in the Binding: the same line with the words behind `--`."""
    done = jigcmd_cli("run", "--binding", str(BINDING), "cli", "--files", FILES, "--greeting", "hi")
    assert done.returncode == 2
    assert done.stderr.rstrip().endswith(
        "unrecognized arguments: --greeting hi; a command's own arguments follow `--`: "
        f"jigcmd run --binding {BINDING} cli --files {FILES} -- --greeting hi"
    )


def test_where_the_kind_is_unknown_the_dashes_line_says_it_is_a_run_commands() -> None:
    """`request` reads no Binding: the `--` line, and that a test command accepts none."""
    done = jigcmd_cli("request", "tests", "--files", FILES, "-t", "slugify")
    assert done.returncode == 2
    assert done.stderr.rstrip().endswith(
        "unrecognized arguments: -t slugify; a command's own arguments follow `--`: jigcmd "
        f"request tests --files {FILES} -- -t slugify (a run command's; a test command accepts "
        "none)"
    )
