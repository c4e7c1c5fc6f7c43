"""`serve --retain`'s prune child: the server's own jigcmd, whatever its working directory holds."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from jigcmd.frontends import retaining


async def test_the_prune_child_runs_the_servers_jigcmd_not_one_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `jigcmd/` package in the server's working directory (a user's project, a checkout)
    is not what prunes the state directory: `python -m` would have put it first."""
    decoy = tmp_path / "cwd" / "jigcmd"
    decoy.mkdir(parents=True)
    marker = tmp_path / "decoy-ran"
    (decoy / "__init__.py").write_text("")
    (decoy / "__main__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(decoy.parent)
    said: list[str] = []
    first = anyio.Event()

    def say(line: str) -> None:
        said.append(line)
        first.set()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(retaining.keep_pruning, tmp_path / "no-such-state", 86_400, say)
            await first.wait()
            tasks.cancel_scope.cancel()
    assert not marker.exists()
    (line,) = said
    assert "jigcmd prune: --state-dir" in line and "no such directory" in line, line


def test_an_answer_that_is_not_the_prunes_is_one_line() -> None:
    """Whatever the child printed, the server says so in a line and goes on serving."""
    said = retaining._summary(b"not json")
    assert said == "retention: the prune's answer could not be read; serving goes on"
