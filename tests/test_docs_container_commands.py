"""The docs' container commands work as copied: into zsh, and as a server that is spoken to.

zsh refuses an unmatched glob, so `unmask=/proc/*` in a shell command must be quoted; `serve`
reads its requests on stdin, which `podman run` and `docker run` pass only with `-i`.
"""

from __future__ import annotations

import itertools
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

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


DEPLOYMENT = REPO / "docs" / "deployment.md"
_JSON = re.compile(r"```json\n(.*?)```", re.S)
_YAML = re.compile(r"```yaml\n(.*?)```", re.S)


def _binds_run_jigcmd(words: list[str]) -> bool:
    """Whether engine arguments bind some directory at the container's /run/jigcmd."""
    return any(
        before == "-v" and word.split(":")[1:2] == ["/run/jigcmd"]
        for before, word in itertools.pairwise(words)
    )


def test_every_documented_jigcmd_container_shares_a_run_jigcmd() -> None:
    """A container with its own /run leases host ids no other jigcmd on the host can see:
    every documented one that runs jigcmd (it binds the cgroup hierarchy) binds /run/jigcmd."""
    documented = [c for c in commands(DEPLOYMENT) if "/sys/fs/cgroup:/sys/fs/cgroup" in c]
    assert len(documented) >= 3, documented
    for command in documented:
        words = shlex.split(command.split("#")[0].replace("…", ""))
        assert _binds_run_jigcmd(words), command


def test_the_documented_mcp_server_entry_shares_run_jigcmd() -> None:
    """The MCP host's `podman run` is a jigcmd container like the others."""
    (block,) = [b for b in _JSON.findall(DEPLOYMENT.read_text()) if "mcpServers" in b]
    assert _binds_run_jigcmd(json.loads(block)["mcpServers"]["jigcmd"]["args"])


def test_the_documented_pod_mounts_the_nodes_run_jigcmd_made_if_absent() -> None:
    """A hostPath of /run/jigcmd, DirectoryOrCreate: /run is a tmpfs, empty after a reboot."""
    (block,) = [b for b in _YAML.findall(DEPLOYMENT.read_text()) if "kind: Pod" in b]
    spec = yaml.safe_load(block)["spec"]
    (container,) = spec["containers"]
    (name,) = [m["name"] for m in container["volumeMounts"] if m["mountPath"] == "/run/jigcmd"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == name]
    assert volume["hostPath"] == {"path": "/run/jigcmd", "type": "DirectoryOrCreate"}
