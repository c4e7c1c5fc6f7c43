"""npm packages the interoperability tests drive, installed into a cache this module manages.

Each pinned package is installed once with `npm install --prefix` into
`$JIGCMD_NPM_CACHE/<name>@<version>` (default `~/.cache/jigcmd-npm`), never globally. Outside
`CI` a missing `node`/`npm` or a failed install is a skip naming the reason; under `CI=true` it
is a failure. `python -m tests.npmtools` installs every pinned package (`.ci/run` calls it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.required import unavailable

__all__ = ["INSPECTOR", "TS_CLIENT", "TS_SDK", "node_package", "npm_cache"]

INSPECTOR = ("@modelcontextprotocol/inspector", "2.12.0")
TS_CLIENT = ("@modelcontextprotocol/client", "2.4.0")
# The v1 TypeScript SDK, the client most MCP hosts are built on.
TS_SDK = ("@modelcontextprotocol/sdk", "1.32.2")
PINNED = (INSPECTOR, TS_CLIENT, TS_SDK)


def npm_cache() -> Path:
    """Where the packages are installed."""
    configured = os.environ.get("JIGCMD_NPM_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "jigcmd-npm"


def install(name: str, version: str) -> Path:
    """Install `name@version` into the cache (once); its prefix directory."""
    prefix = npm_cache() / f"{name.replace('/', '+')}@{version}"
    marker = prefix / ".installed"
    # Every package here runs under node: a cached install is no use once node is gone.
    if shutil.which("node") is None:
        raise FileNotFoundError("node is not installed (Debian: nodejs npm)")
    if marker.exists():
        return prefix
    npm = shutil.which("npm")
    if npm is None:
        raise FileNotFoundError("npm is not installed (Debian: npm)")
    prefix.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), f"{name}@{version}"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"npm install {name}@{version} failed: {done.stderr.strip()[-500:]}")
    marker.write_text(f"{name}@{version}\n")
    return prefix


def node_package(package: tuple[str, str]) -> Path:
    """The install prefix of a pinned package, or a skip (a failure under CI) with the reason."""
    name, version = package
    try:
        return install(name, version)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        unavailable(f"{name}@{version} is not available: {exc}")
        raise AssertionError("unreachable") from exc


def main() -> int:
    """Install every pinned package; 0 when all are in the cache."""
    for name, version in PINNED:
        print(f"npm: {name}@{version} -> {install(name, version)}")  # noqa: T201 - a CLI's output
    return 0


if __name__ == "__main__":
    sys.exit(main())
