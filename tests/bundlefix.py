"""The bundling fix `jigcmd init` suggests, read from its words and run as given."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.required import require_runtime
from tests.test_cli_run import jigcmd_cli

__all__ = ["build_as_suggested", "suggested_bundles"]

_FIX = re.compile(r"bundle on the host, `([^`]+)`, and name each bundle \(([^)]+)\) instead")


def suggested_bundles(root: Path) -> tuple[str, list[str]]:
    """`jigcmd init root`'s bundling fix: its `bun build` line, and the bundles it names."""
    init = jigcmd_cli("init", str(root))
    assert init.returncode == 0, init.stderr
    found = _FIX.search(init.stderr)
    assert found is not None, init.stderr
    return found.group(1), found.group(2).split(", ")


def build_as_suggested(root: Path, builds: str) -> None:
    """Run the suggested line in `root` with the Bun jigcmd runs first on PATH."""
    path = os.path.dirname(require_runtime().path) + os.pathsep + os.environ.get("PATH", "")
    env = {**os.environ, "PATH": path}
    subprocess.run(["sh", "-c", builds], cwd=root, env=env, check=True, capture_output=True)
