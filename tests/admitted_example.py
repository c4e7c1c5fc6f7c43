"""The bundled example, copied and admitted (`jigcmd lock`), for tests that serve it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.required import require_root

__all__ = ["EXAMPLE", "admit_example", "jigcmd_cli"]

EXAMPLE = Path(__file__).resolve().parents[1] / "jigcmd" / "example"


def admit_example(tmp_path: Path, commands: str = "") -> Path:
    """A copy of the example under `tmp_path`, locked; its Binding's path (needs root).

    `commands`: TOML lines added to the Binding's `[commands]` before it is locked."""
    require_root()
    copy = Path(shutil.copytree(EXAMPLE, tmp_path / "example"))
    if commands:
        binding = copy / "binding.toml"
        binding.write_text(binding.read_text() + commands)
    subprocess.run(
        [sys.executable, "-m", "jigcmd", "lock", "--binding", str(copy / "binding.toml")],
        check=True,
        capture_output=True,
    )
    return copy / "binding.toml"


def jigcmd_cli(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """The jigcmd command line run to its end (text, stdin closed, two minutes at most)."""
    return subprocess.run(
        [sys.executable, "-m", "jigcmd", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
        stdin=subprocess.DEVNULL,
    )
