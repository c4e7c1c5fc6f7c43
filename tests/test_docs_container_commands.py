"""The docs' container commands work as copied: into zsh, and as a server that is spoken to.

zsh refuses an unmatched glob, so `unmask=/proc/*` in a shell command must be quoted; `serve`
reads its requests on stdin, which `podman run` and `docker run` pass only with `-i`.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_SHELL = re.compile(r"^ *```(?:sh|bash|console)\n(.*?)^ *```", re.S | re.M)


def commands(path: Path) -> list[str]:
    """Every engine `run` command of `path`'s shell blocks, continuation lines joined."""
    found = []
    for block in _SHELL.findall(path.read_text(encoding="utf-8")):
        joined = re.sub(r"\\\n\s*", " ", block)
        found += [
            line.strip()
            for line in joined.splitlines()
            if re.search(r"\b(podman|docker) run\b", line)
        ]
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_documented_unmask_of_proc_is_quoted_for_the_shell(page: Path) -> None:
    """`--security-opt unmask=/proc/*` unquoted is `no matches found` in zsh."""
    for command in commands(page):
        assert "unmask=/proc/*" not in command.replace("'unmask=/proc/*'", ""), command


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_documented_containerised_serve_keeps_stdin_open(page: Path) -> None:
    """An engine's `run … jigcmd serve` without -i hands serve a closed stdin."""
    for command in commands(page):
        words = shlex.split(command.split("#")[0].replace("…", ""))
        if "serve" in words and "jigcmd" in words:
            engine_options = words[: words.index("jigcmd")]
            assert "-i" in engine_options or "--interactive" in engine_options, command
