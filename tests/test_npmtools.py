"""The npm package cache the interoperability tests use: node missing is a skip, or a failure
under `CI`, even when the packages are already installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import npmtools


def _cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A pinned-looking package already installed in a cache of its own, and no node on PATH."""
    package = ("@jigcmd-test/pkg", "1.0.0")
    prefix = tmp_path / "cache" / "@jigcmd-test+pkg@1.0.0"
    prefix.mkdir(parents=True)
    (prefix / ".installed").write_text("@jigcmd-test/pkg@1.0.0\n")
    monkeypatch.setenv("JIGCMD_NPM_CACHE", str(tmp_path / "cache"))
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return package


def test_a_cached_package_without_node_is_a_skip_naming_the_debian_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside CI: skipped, and the reason says node is missing and what to install."""
    package = _cached(tmp_path, monkeypatch)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"node is not installed \(Debian: nodejs"):
        npmtools.node_package(package)


def test_a_cached_package_without_node_fails_under_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under CI=true the same is a failure that names node."""
    package = _cached(tmp_path, monkeypatch)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="node is not installed"):
        npmtools.node_package(package)


def test_a_cached_package_with_node_is_its_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With node on PATH the cached install is used as it is (npm is not needed)."""
    package = _cached(tmp_path, monkeypatch)
    node = tmp_path / "bin" / "node"
    node.write_text("#!/bin/sh\n")
    node.chmod(0o755)
    assert npmtools.node_package(package) == tmp_path / "cache" / "@jigcmd-test+pkg@1.0.0"
