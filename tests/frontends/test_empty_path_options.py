"""An empty path option (an unset shell variable) is refused, never taken as the cwd.

`Path("")` is `.`: `--state-dir "$STATE"` with STATE unset made the working directory the
state directory, its journal and slots written beside whatever was there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import jigcmd

_BINDING = Path(jigcmd.__file__).parent / "example" / "binding.toml"
_PING = b'{"jsonrpc":"2.0","id":"p1","method":"ping"}\n'


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["serve", "--binding", str(_BINDING), "--state-dir", ""], "--state-dir"),
        (["prune", "--state-dir", "", "--older-than", "7d"], "--state-dir"),
        (["runs", "--state-dir", ""], "--state-dir"),
        (["doctor", "--state-dir", ""], "--state-dir"),
        (["serve", "--binding", str(_BINDING), "--signing-key", ""], "--signing-key"),
        (["serve", "--binding", ""], "--binding"),
    ],
)
def test_an_empty_path_option_is_refused_with_status_2_and_nothing_made_in_the_cwd(
    argv: list[str], option: str, tmp_path: Path
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "jigcmd", *argv],
        cwd=cwd,
        input=_PING,
        capture_output=True,
        timeout=120,
        check=False,
    )
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert f"argument {option}: an empty path (an unset shell variable?)" in err
    assert "would mean the current directory" in err
    assert list(cwd.iterdir()) == []
