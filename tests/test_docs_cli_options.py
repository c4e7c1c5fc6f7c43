"""docs/cli.md's table lists every option each verb's `--help` shows, and no other.

The table's first column is each verb's synopsis (`jigcmd VERB …`, in a code span); its
`--options` must be exactly the verb's argparse options, less `--help` and `--verbose`
(documented once for every verb), so an option added to the parser must be documented.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from jigcmd.cliparser import parser

CLI_MD = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
_EVERY_VERB = {"--help", "--verbose"}
_SPAN = re.compile(r"`jigcmd ([a-z-]+)((?: [^`]*)?)`")
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def _verbs() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def _parsed(verb: argparse.ArgumentParser) -> set[str]:
    return {
        option
        for action in verb._actions
        for option in action.option_strings
        if option.startswith("--") and option not in _EVERY_VERB
    }


def _documented() -> dict[str, set[str]]:
    """Each verb's options as the table's synopsis column names them."""
    found: dict[str, set[str]] = {}
    for line in CLI_MD.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `jigcmd "):
            continue
        synopsis = line.split(" | ")[0]
        for verb, rest in _SPAN.findall(synopsis):
            found.setdefault(verb, set()).update(_OPTION.findall(rest))
    return found


@pytest.mark.parametrize("verb", sorted(_verbs()))
def test_the_table_names_exactly_the_options_of_the_verbs_help(verb: str) -> None:
    documented = _documented()
    assert verb in documented, f"docs/cli.md has no row for `jigcmd {verb}`"
    assert documented[verb] == _parsed(_verbs()[verb]), verb


def test_the_options_every_verb_has_are_documented_once() -> None:
    text = CLI_MD.read_text(encoding="utf-8")
    assert "`-v` (`--verbose`)" in text and "for every verb" in text
