"""What an installed jigcmd carries: the wheel holds the package's data files and the schemas.

A user who installs the wheel built from a checkout has nothing else of it: the example,
the jarvis example policy and the published schemas must be inside it.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCHEMAS = REPO / "schemas"


def _wheel(tmp_path: Path) -> zipfile.ZipFile:
    """The wheel `pip wheel` builds from this checkout, as a release would."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q", "-w", str(tmp_path)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (built,) = tmp_path.glob("jigcmd-*.whl")
    return zipfile.ZipFile(built)


def _tracked(directory: str) -> list[str]:
    """The files of `directory` that git tracks or would (untracked, not ignored)."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "--cached", "--others", "--exclude-standard", "-z",
         directory],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return [name for name in listed.stdout.split("\0") if name]


@pytest.mark.slow
def test_the_wheel_carries_the_schemas_the_example_and_every_package_file(
    tmp_path: Path,
) -> None:
    """schemas/*.json byte for byte in `jigcmd/schemas/`, and every file of jigcmd/."""
    with _wheel(tmp_path) as wheel:
        names = set(wheel.namelist())
        missing = [name for name in _tracked("jigcmd") if name not in names]
        assert missing == [], missing
        published = sorted(SCHEMAS.glob("*.json"))
        assert published
        for schema in published:
            packaged = wheel.read(f"jigcmd/schemas/{schema.name}")
            assert packaged == schema.read_bytes(), schema.name
        shipped = {n for n in names if n.startswith("jigcmd/schemas/")}
        assert shipped == {f"jigcmd/schemas/{s.name}" for s in published}
    for name in ("example/binding.toml", "jarvis/example-policy.toml"):
        assert f"jigcmd/{name}" in names, name


@pytest.mark.slow
def test_the_wheel_carries_the_license_it_declares(tmp_path: Path) -> None:
    """The MIT text itself travels with the wheel, and its metadata names the same licence."""
    with _wheel(tmp_path) as wheel:
        (metadata,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
        assert "License-Expression: MIT" in wheel.read(metadata).decode().splitlines()
        licence = metadata.replace("METADATA", "licenses/LICENSE")
        assert wheel.read(licence) == (REPO / "LICENSE").read_bytes()
    assert (REPO / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")


def test_every_path_the_sdist_includes_exists() -> None:
    """The sdist's `include` list names files and directories of the checkout, no others."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
    assert [path for path in include if not (REPO / path).exists()] == []
